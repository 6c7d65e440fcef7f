"""``/metrics``, ``/healthz`` and ``/readyz`` of the placement manager, on its metrics port.

Readiness is what the kubelet and ``kubectl get pods`` show, and a Deployment rollout waits for it: a
replica whose admission gate webhook the API server cannot call, or that just saw a pod created around
the gate, is not ready, so a broken install does not look healthy. ``/readyz`` answers 503 with one line
per reason (``curl`` shows them), 200 ``ok`` otherwise. Not being ready takes nothing away: the webhook
Service publishes not-ready replicas too (``manifests/pin-webhook.yaml``), so the webhooks stay
reachable while a replica says something is wrong. ``/healthz`` only says the process serves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

Reasons = Callable[[], Sequence[str]]
"""Why the replica is not ready now (empty: ready)."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Probes and scrapes come every few seconds; nothing to log."""


def health_app(registry: CollectorRegistry, reasons: Iterable[Reasons]) -> Callable[..., Iterable[bytes]]:
    """The WSGI application: ``/readyz`` and ``/healthz`` here, everything else to the metrics."""
    metrics = make_wsgi_app(registry)
    checks = tuple(reasons)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"ok\n"]
        if path == "/readyz":
            problems = [line for check in checks for line in check()]
            status = "503 Service Unavailable" if problems else "200 OK"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return ["".join(f"{p}\n" for p in problems).encode() if problems else b"ok\n"]
        result: Iterable[bytes] = metrics(environ, start_response)
        return result

    return app


def serve_health(
    port: int, registry: CollectorRegistry, reasons: Iterable[Reasons], *, host: str = "0.0.0.0"
) -> WSGIServer:
    """Serve ``health_app`` on ``port`` from a daemon thread; ``shutdown()`` to stop.

    Raises:
        OSError: the port is taken.
    """
    server = make_server(host, port, health_app(registry, reasons), _Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
