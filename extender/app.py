"""The Flask application factory: wires an ``Extender`` service, metrics and routes together."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from prometheus_client import CollectorRegistry

from extender import routes
from extender.metrics import ExtenderMetrics
from extender.service import Extender
from extender.settings import ExtenderSettings


def create_app(
    settings: ExtenderSettings,
    service: Extender,
    *,
    registry: CollectorRegistry,
    ready: Callable[[], bool],
) -> Flask:
    """Build the WSGI app around an already-built service (dependencies are injected, not created)."""
    app = Flask("phalanx-extender")
    app.config["PHALANX_MAX_BODY_BYTES"] = settings.max_body_bytes
    app.extensions["phalanx"] = {
        "service": service,
        "metrics": ExtenderMetrics.create(registry),
        "registry": registry,
        "ready": ready,
    }
    routes.register(app)
    return app
