"""The bench's null extenders in Python: filter passes every candidate, prioritize scores nothing.

They decide nothing; they measure what the extender protocol's two calls per pod cost in a stack,
whatever the extender does (``perf.floor``). Both run under gunicorn with the extender's own worker
(``extender.worker.FrontWorker``: the asyncio front of ``kubeio.serving`` before a thread pool):

- ``flask_app``: through Flask, as every path of the extender was served before ``extender.hot``;
- ``front_app``: the same app with an ``extensions["front"]`` hook that answers the two verbs from the
  buffered request with msgspec, as ``extender.hot`` does (``extender.hot.front_handler``).

``gunicorn -k extender.worker.FrontWorker perf.nullext:flask_app`` (``hack/`` on ``PYTHONPATH``).
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from flask import Flask, Response, request

from kubeio.serving import Reply, Request


class Args(msgspec.Struct):
    """The part of ``ExtenderArgs`` a null extender reads."""

    NodeNames: list[str] | None = None


class FilterResult(msgspec.Struct):
    """``ExtenderFilterResult``: every candidate passes."""

    NodeNames: list[str]
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str = ""
    Nodes: None = None


_decode = msgspec.json.Decoder(Args).decode
_encode = msgspec.json.Encoder().encode
_JSON = (("content-type", "application/json"),)


def _passed(body: bytes) -> bytes:
    return _encode(FilterResult(_decode(body).NodeNames or [], {}, {}))


flask_app = Flask("phalanx-null-extender")


@flask_app.post("/filter")
def _filter() -> Response:
    return Response(_passed(request.get_data()), mimetype="application/json")


@flask_app.post("/prioritize")
def _prioritize() -> Response:
    _decode(request.get_data())
    return Response(b"[]", mimetype="application/json")


@flask_app.get("/healthz")
def _healthz() -> Response:
    return Response(b"ok")


def _front(fallback: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    def handle(req: Request) -> Reply:
        if req.method == "POST" and req.target == "/filter":
            return Reply(200, _JSON, _passed(req.body))
        if req.method == "POST" and req.target == "/prioritize":
            _decode(req.body)
            return Reply(200, _JSON, b"[]")
        return fallback(req)

    return handle


front_app = Flask("phalanx-null-extender-front")
front_app.extensions["front"] = _front
front_app.add_url_rule("/healthz", view_func=_healthz)
