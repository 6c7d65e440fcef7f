"""Composition root: the one place that builds real clients, caches and registries.

gunicorn calls ``create()`` once in its single worker (``gunicorn 'extender.wsgi:create()'``), so the
cache threads live in the process that serves the requests.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from flask import Flask
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.service import Extender
from extender.settings import ExtenderSettings
from kubeio.binding import PodBinder
from kubeio.cluster_cache import ClusterCache
from kubeio.http import KubeHttp, load_api_client

log = logging.getLogger(__name__)


def create() -> Flask:
    """Build the extender from the environment and start its caches."""
    logging.basicConfig(
        level=os.environ.get("PHALANX_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    settings = ExtenderSettings.from_env(os.environ)
    http = KubeHttp(load_api_client(settings.kubeconfig, pool_size=max(16, settings.threads)))
    cache = ClusterCache()
    service = Extender(
        cache,
        PodBinder(http, timeout=settings.api_timeout_seconds),
        clock=time.monotonic,
        promise_ttl=settings.promise_ttl_seconds,
        topologies=cache.topologies,
    )
    cache.add_listener(service.pod_changed)
    stop = threading.Event()
    cache.start(http, stop)
    if not cache.wait_synced(settings.ready_timeout_seconds):
        log.warning(
            "caches not synced after %ss; serving, /readyz says not ready", settings.ready_timeout_seconds
        )
    return create_app(settings, service, registry=CollectorRegistry(), ready=lambda: cache.synced)
