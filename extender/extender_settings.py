"""Extender settings: each declared once in :data:`SETTINGS` (variable, type, help), from the environment.

gunicorn owns the extender's command line, so its settings have no flags: ``kubeio.setting.read_env``
reads the same kind of rows the other entrypoints parse with click, through the same types
(docs/design/style.md §10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import click

from kubeio.config import LOG_LEVEL, LOG_LEVEL_ENV, NAMES, PORT, SECONDS, SWITCH, Seconds, SettingsError
from kubeio.setting import Setting, read_env


@dataclass(frozen=True, slots=True)
class ExtenderSettings:
    """How the extender runs."""

    kubeconfig: str | None = None
    """Path of a kubeconfig; unset means the in-cluster service account (``KUBECONFIG``)."""

    bind_address: str = "127.0.0.1"
    """Address to listen on. The extender is a sidecar of its kube-scheduler, so loopback by default."""

    port: int = 8888
    """Port to listen on; must match ``urlPrefix`` in ``manifests/scheduler-config.yaml``."""

    metrics_port: int = 0
    """A second listener, on all addresses, that serves only ``/metrics`` (``PHALANX_METRICS_PORT``; 0:
    none). The verbs stay on the loopback ``port`` (``/bind`` must not be reachable from the network);
    Prometheus scrapes this one."""

    threads: int = 256
    """Concurrent requests. kube-scheduler sends one bind per pod concurrently; a gang needs one slot
    per member, and filter/prioritize must not queue behind them."""

    max_body_bytes: int = 16 * 2**20
    """Largest request body accepted. With ``nodeCacheCapable: true`` 5,000 node names are ~100 KiB."""

    request_read_timeout_seconds: float = 10.0
    """Longest a request may take to arrive, from its first byte to its last, and a TLS handshake
    (``PHALANX_REQUEST_READ_TIMEOUT_SECONDS``). Requests are read without a thread
    (``extender.worker``); this frees the connection of a client that stopped half-way. kube-scheduler
    sends a request at once, in milliseconds."""

    max_connections: int = 1000
    """Open connections at most (``PHALANX_MAX_CONNECTIONS``): at the bound, a new connection closes the
    one that has waited longest without being served (``kubeio.serving``)."""

    promise_ttl_seconds: float = 300.0
    """How long GPUs chosen at bind stay reserved if the pod's bound state never reaches the cache."""

    api_timeout_seconds: float = 20.0
    """Timeout of one API call made by ``bind``; below kube-scheduler's ``httpTimeout`` (30 s)."""

    ready_timeout_seconds: float = 60.0
    """How long start-up waits for the first list of nodes and pods before serving anyway."""

    reservation_ttl_seconds: float = 60.0
    """How long a gang's reservation made at filter holds without its members reaching bind."""

    bind_wait_seconds: float = 25.0
    """Longest a gang member's bind waits for the rest of the gang (also capped by the PodGroup's
    ``scheduleTimeoutSeconds``); must stay below kube-scheduler's ``httpTimeout`` (30 s)."""

    gang_bind_delay_seconds: float = 0.0
    """Fault injection for crash tests: the n-th member of a released gang waits n times this long
    before its Binding, which widens the window in which a gang is half-bound. Keep 0 in production."""

    locality_keys: tuple[str, ...] = ("phalanx.io/rack", "topology.kubernetes.io/zone")
    """Node labels of locality domains, innermost first: gangs are kept inside one when it fits."""

    recovery_interval_seconds: float = 5.0
    """How often gangs left with a bind plan (a crash, a failed Binding) are completed or rolled back."""

    duty_window_seconds: float = 10.0
    """The extender acts on its own (gang recovery) only within this long of its kube-scheduler's last
    call (``PHALANX_DUTY_WINDOW_SECONDS``, ``extender.duty``). Keep it below kube-scheduler's
    ``leaseDuration`` (15 s by default): a new leader's extender starts acting only after the old one
    stopped."""

    decisive: bool = True
    """Answer ``filter`` with the one node phalanx ranks first for a pod on its own
    (``PHALANX_DECISIVE``; ``scheduling.nodes.decisive``): kube-scheduler then runs no Score plugin and
    calls no ``prioritize`` for it, a round trip and a scoring pass less per pod. Pods with in-tree
    preferences phalanx does not model keep the ranked path (``extender.wire.ranked_path_reason``).
    ``false`` sends every feasible node, for kube-scheduler to score with ``prioritize``
    (``docs/design/decisive-filter.md``)."""

    nominate: bool = True
    """Write each reserved gang member's node into its ``status.nominatedNodeName``
    (``PHALANX_NOMINATE``; ``scheduling.gang.nomination``): kube-scheduler then tries that node alone
    before any other, one Filter pass on one node and a filter call with one name instead of every node.
    ``false`` for a kube-scheduler older than v1.35, where the field is kube-scheduler's own."""

    hot_verbs: bool = True
    """Answer ``filter`` and ``prioritize`` in the worker without Flask (``PHALANX_HOT_VERBS``;
    ``extender.hot``): the same replies, without Flask's per-request work on kube-scheduler's serial
    path. ``false`` sends them through the Flask routes like every other path."""

    log_level: str = "INFO"
    """Python logging level name (``PHALANX_LOG_LEVEL``), given to ``logging.basicConfig`` as it is."""

    tls_cert_file: str | None = None
    """PEM certificate (chain) to serve HTTPS with (``PHALANX_TLS_CERT_FILE``); unset serves plain HTTP,
    which is right for the sidecar on loopback. Set together with ``tls_key_file``, and give
    kube-scheduler the ``tlsConfig`` shown in ``manifests/scheduler-config.yaml``."""

    tls_key_file: str | None = None
    """PEM private key of ``tls_cert_file`` (``PHALANX_TLS_KEY_FILE``)."""

    @property
    def serves_tls(self) -> bool:
        """Whether the extender serves HTTPS (both the certificate and its key are set)."""
        return self.tls_cert_file is not None

    @staticmethod
    def from_env(environ: Mapping[str, str]) -> ExtenderSettings:
        """Read ``PHALANX_*`` variables (and ``KUBECONFIG``); unset or empty ones keep their defaults.

        Raises:
            kubeio.config.SettingsError: a variable is set to a value of the wrong type or out of range,
                or only one of the TLS certificate and key is set.
        """
        settings = read_env(SETTINGS, ExtenderSettings(), environ)
        if (settings.tls_cert_file is None) != (settings.tls_key_file is None):
            msg = "PHALANX_TLS_CERT_FILE and PHALANX_TLS_KEY_FILE must be set together (HTTPS needs both)"
            raise SettingsError(msg)
        return settings


def _env(field: str, env: str, type_: click.ParamType[Any] = click.STRING, *, help_: str) -> Setting:
    """A row read from one variable alone (the extender has no flags)."""
    return Setting(field, None, (env,), type_, help_)


SETTINGS = (
    _env("kubeconfig", "KUBECONFIG", help_="kubeconfig path; unset: in-cluster"),
    _env(
        "bind_address",
        "PHALANX_BIND_ADDRESS",
        help_="listen address (loopback: the extender is its kube-scheduler's sidecar)",
    ),
    _env(
        "port",
        "PHALANX_PORT",
        click.IntRange(1, 65535),
        help_="listen port; must match urlPrefix in the scheduler configuration",
    ),
    _env(
        "metrics_port",
        "PHALANX_METRICS_PORT",
        PORT,
        help_="a second listener on all addresses serving only /metrics; 0: none",
    ),
    _env(
        "threads",
        "PHALANX_THREADS",
        click.IntRange(1, 4096),
        help_="concurrent requests: at least the largest gang (its binds wait for each other)",
    ),
    _env(
        "max_body_bytes",
        "PHALANX_MAX_BODY_BYTES",
        click.IntRange(1024, 2**31),
        help_="larger requests get HTTP 413",
    ),
    _env(
        "request_read_timeout_seconds",
        "PHALANX_REQUEST_READ_TIMEOUT_SECONDS",
        SECONDS,
        help_="longest a request (or a TLS handshake) may take to arrive; then HTTP 408",
    ),
    _env(
        "max_connections",
        "PHALANX_MAX_CONNECTIONS",
        click.IntRange(1, 1_000_000),
        help_="open connections at most; then the one waiting longest unserved is closed",
    ),
    _env(
        "promise_ttl_seconds",
        "PHALANX_PROMISE_TTL_SECONDS",
        SECONDS,
        help_="how long GPUs chosen at bind stay reserved if the bound pod never shows up",
    ),
    _env(
        "api_timeout_seconds",
        "PHALANX_API_TIMEOUT_SECONDS",
        SECONDS,
        help_="timeout of the API calls made by bind (below httpTimeout, 30 s)",
    ),
    _env(
        "ready_timeout_seconds",
        "PHALANX_READY_TIMEOUT_SECONDS",
        SECONDS,
        help_="how long start-up waits for the first list of nodes and pods",
    ),
    _env(
        "reservation_ttl_seconds",
        "PHALANX_RESERVATION_TTL_SECONDS",
        SECONDS,
        help_="how long a gang's reservation holds without its members reaching bind",
    ),
    _env(
        "bind_wait_seconds",
        "PHALANX_BIND_WAIT_SECONDS",
        SECONDS,
        help_="longest a gang member's bind waits for the rest of the gang",
    ),
    _env(
        "gang_bind_delay_seconds",
        "PHALANX_GANG_BIND_DELAY_SECONDS",
        Seconds(zero=True),
        help_="fault injection for crash tests only: spreads a gang's Bindings in time",
    ),
    _env(
        "locality_keys",
        "PHALANX_LOCALITY_KEYS",
        NAMES,
        help_="node labels of locality domains, innermost first, comma-separated",
    ),
    _env(
        "recovery_interval_seconds",
        "PHALANX_RECOVERY_INTERVAL_SECONDS",
        SECONDS,
        help_="how often gangs left with a bind plan are completed or rolled back",
    ),
    _env(
        "duty_window_seconds",
        "PHALANX_DUTY_WINDOW_SECONDS",
        SECONDS,
        help_="act on its own only this long after kube-scheduler's last call",
    ),
    _env(
        "decisive",
        "PHALANX_DECISIVE",
        SWITCH,
        help_="answer filter with the one node ranked first for a pod on its own",
    ),
    _env(
        "nominate",
        "PHALANX_NOMINATE",
        SWITCH,
        help_="nominate each reserved gang member's node, so kube-scheduler tries it alone first",
    ),
    _env(
        "hot_verbs",
        "PHALANX_HOT_VERBS",
        SWITCH,
        help_="answer filter and prioritize in the worker, without Flask",
    ),
    _env("log_level", LOG_LEVEL_ENV, LOG_LEVEL, help_="Python logging level"),
    _env(
        "tls_cert_file",
        "PHALANX_TLS_CERT_FILE",
        help_="PEM certificate to serve HTTPS with (with the key); unset: plain HTTP",
    ),
    _env("tls_key_file", "PHALANX_TLS_KEY_FILE", help_="its private key"),
)
"""Every setting of the extender, once; the field docstrings above say what each means."""
