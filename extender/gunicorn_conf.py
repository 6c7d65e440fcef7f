"""gunicorn settings for the extender: one process, many threads.

One process because the promise book and (later) gang reservations and bind barriers live in memory:
two processes would each see half of the decisions (extender-protocol.md §4.2, §5.9). Threads because
kube-scheduler sends one bind per pod concurrently, and a gang's binds wait for each other.
"""

from __future__ import annotations

import os

from extender.settings import ExtenderSettings

_settings = ExtenderSettings.from_env(os.environ)

bind = f"{_settings.bind_address}:{_settings.port}"
workers = 1
worker_class = "gthread"
threads = _settings.threads
timeout = 120
graceful_timeout = 10
keepalive = 75
accesslog = None
