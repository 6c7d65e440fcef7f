"""gunicorn settings for the extender: one process, many threads.

One process because the promise book, gang reservations and bind barriers live in memory:
two processes would each see half of the decisions (docs/design/extender-protocol.md §4.2, §5.9). Threads
because kube-scheduler sends one bind per pod concurrently, and a gang's binds wait for each other. The worker
is ``extender.worker.FrontWorker``, not ``gthread``: it reads each request in full without a thread
before a thread runs it, so clients that send half a request cannot take the threads kube-scheduler's
calls and the health probes need (``kubeio.serving`` has the measurements and the bounds).

HTTPS when ``PHALANX_TLS_CERT_FILE`` and ``PHALANX_TLS_KEY_FILE`` are set (gunicorn's own TLS, TLS 1.2 at
least); plain HTTP otherwise, as the sidecar on loopback is deployed.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

from extender.extender_settings import ExtenderSettings

_settings = ExtenderSettings.from_env(os.environ)

bind = f"{_settings.bind_address}:{_settings.port}"
workers = 1
worker_class = "extender.worker.FrontWorker"
threads = _settings.threads
worker_connections = _settings.max_connections
timeout = 120
graceful_timeout = 10
keepalive = 75  # seconds a kept-alive connection may wait for its next request
accesslog = None

MINIMUM_TLS_VERSION = ssl.TLSVersion.TLSv1_2
"""Oldest TLS version served; kube-scheduler (Go's crypto/tls) offers 1.2 and 1.3."""

if _settings.serves_tls:
    certfile = _settings.tls_cert_file
    keyfile = _settings.tls_key_file


def ssl_context(config: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
    """The server hook of gunicorn: its default context (certfile, keyfile), refusing TLS below 1.2."""
    context = default_ssl_context_factory()
    context.minimum_version = MINIMUM_TLS_VERSION
    return context
