"""A WSGI app for ``test_worker``: gunicorn imports it by name, with the extender's gunicorn settings."""

from __future__ import annotations

from flask import Flask, Response

app = Flask("probe")


@app.get("/healthz")
def healthz() -> Response:
    """The process answers."""
    return Response(b'{"status":"ok"}', mimetype="application/json")
