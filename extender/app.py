"""The Flask application factory: wires an ``Extender`` service, metrics and routes together."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask, request
from prometheus_client import CollectorRegistry

from extender import routes, wire
from extender.duty import Duty
from extender.extender_metrics import ExtenderMetrics
from extender.extender_settings import ExtenderSettings
from extender.hot import hot_handler
from extender.service import Extender


def create_app(
    settings: ExtenderSettings,
    service: Extender,
    *,
    registry: CollectorRegistry,
    ready: Callable[[], bool],
    duty: Duty | None = None,
) -> Flask:
    """Build the WSGI app around an already-built service (dependencies are injected, not created).

    With ``duty``, every verb call is noted on it first (``extender.duty``: the first call after a
    quiet spell recovers half-bound gangs before it is answered).
    """
    app = Flask("phalanx-extender")
    app.config["PHALANX_MAX_BODY_BYTES"] = settings.max_body_bytes
    metrics = ExtenderMetrics.create(registry)
    metrics.open_promises.set_function(lambda: len(service.promises.by_uid))  # the truth at each scrape
    metrics.decisions_kept.set_function(lambda: len(service.decisions))
    app.extensions["phalanx"] = {
        "service": service,
        "metrics": metrics,
        "registry": registry,
        "ready": ready,
        "pods": wire.PodMemo(),  # filter and prioritize of one cycle send the same pod
    }
    if settings.hot_verbs:  # the worker answers filter and prioritize without Flask (extender.hot)
        app.extensions["front"] = lambda fallback: hot_handler(service, metrics, duty, fallback)
    if duty is not None:

        @app.before_request
        def note_call() -> None:
            if request.path in VERB_PATHS:
                duty.called()

    routes.register(app)
    return app


VERB_PATHS = frozenset({"/filter", "/prioritize", "/bind", "/preempt"})
"""The paths kube-scheduler calls; a probe or a scrape is no sign of duty."""
