"""Extender settings, read from the environment in one place (docs/design/style.md §10)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubeio.config import LOG_LEVEL_ENV, SettingsError, env_bool, env_float, env_int


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
        """Read ``PHALANX_*`` variables (and ``KUBECONFIG``); unset ones keep their defaults.

        Raises:
            kubeio.config.SettingsError: a variable is set to a value of the wrong type or out of range,
                or only one of the TLS certificate and key is set.
        """
        defaults = ExtenderSettings()
        cert, key = environ.get("PHALANX_TLS_CERT_FILE") or None, environ.get("PHALANX_TLS_KEY_FILE") or None
        if (cert is None) != (key is None):
            msg = "PHALANX_TLS_CERT_FILE and PHALANX_TLS_KEY_FILE must be set together (HTTPS needs both)"
            raise SettingsError(msg)
        return ExtenderSettings(
            kubeconfig=environ.get("KUBECONFIG") or None,
            bind_address=environ.get("PHALANX_BIND_ADDRESS", defaults.bind_address),
            port=env_int(environ, "PHALANX_PORT", defaults.port, minimum=1, maximum=65535),
            metrics_port=env_int(
                environ, "PHALANX_METRICS_PORT", defaults.metrics_port, minimum=0, maximum=65535
            ),
            threads=env_int(environ, "PHALANX_THREADS", defaults.threads, minimum=1, maximum=4096),
            max_body_bytes=env_int(
                environ, "PHALANX_MAX_BODY_BYTES", defaults.max_body_bytes, minimum=1024, maximum=2**31
            ),
            request_read_timeout_seconds=env_float(
                environ, "PHALANX_REQUEST_READ_TIMEOUT_SECONDS", defaults.request_read_timeout_seconds
            ),
            max_connections=env_int(
                environ, "PHALANX_MAX_CONNECTIONS", defaults.max_connections, minimum=1, maximum=1_000_000
            ),
            promise_ttl_seconds=env_float(
                environ, "PHALANX_PROMISE_TTL_SECONDS", defaults.promise_ttl_seconds
            ),
            api_timeout_seconds=env_float(
                environ, "PHALANX_API_TIMEOUT_SECONDS", defaults.api_timeout_seconds
            ),
            ready_timeout_seconds=env_float(
                environ, "PHALANX_READY_TIMEOUT_SECONDS", defaults.ready_timeout_seconds
            ),
            reservation_ttl_seconds=env_float(
                environ, "PHALANX_RESERVATION_TTL_SECONDS", defaults.reservation_ttl_seconds
            ),
            bind_wait_seconds=env_float(environ, "PHALANX_BIND_WAIT_SECONDS", defaults.bind_wait_seconds),
            gang_bind_delay_seconds=env_float(
                environ, "PHALANX_GANG_BIND_DELAY_SECONDS", defaults.gang_bind_delay_seconds, allow_zero=True
            ),
            locality_keys=tuple(
                k.strip()
                for k in environ.get("PHALANX_LOCALITY_KEYS", ",".join(defaults.locality_keys)).split(",")
                if k.strip()
            ),
            recovery_interval_seconds=env_float(
                environ, "PHALANX_RECOVERY_INTERVAL_SECONDS", defaults.recovery_interval_seconds
            ),
            duty_window_seconds=env_float(
                environ, "PHALANX_DUTY_WINDOW_SECONDS", defaults.duty_window_seconds
            ),
            decisive=env_bool(environ, "PHALANX_DECISIVE", defaults.decisive),
            hot_verbs=env_bool(environ, "PHALANX_HOT_VERBS", defaults.hot_verbs),
            log_level=environ.get(LOG_LEVEL_ENV, defaults.log_level),
            tls_cert_file=cert,
            tls_key_file=key,
        )
