"""Placement manager settings: each declared once (flag, variables, type, help) in :data:`SETTINGS`.

The flags fall back to their environment variables, then to the dataclass's defaults; the nested
settings of the elastic planner and of the release pass are the core's own dataclasses
(``ElasticSettings``, ``GateSettings``), filled from their rows (``kubeio.setting``), so their defaults
live once, in the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import click

from kubeio.config import LOG_LEVEL, LOG_LEVEL_ENV, NAMES, PORT, SECONDS, SWITCH
from kubeio.setting import Setting, command, parse
from scheduling.admission.outcome import GateSettings
from scheduling.elastic import ElasticSettings


@dataclass(frozen=True, slots=True)
class PlacementSettings:
    """How the placement manager runs."""

    kubeconfig: str | None = None
    """kubeconfig path; unset means the in-cluster service account (``KUBECONFIG``)."""

    interval_seconds: float = 2.0
    """Time between reconcile passes (``PHALANX_PLACEMENT_INTERVAL_SECONDS``)."""

    stale_grace_seconds: float = 60.0
    """How long a placed gang may run below ``minMember`` before it is evicted whole
    (``PHALANX_STALE_GANG_GRACE_SECONDS``); long enough for a controller to replace a lost member."""

    metrics_port: int = 0
    """Port of ``/metrics`` on all addresses; 0 turns it off (``PHALANX_PLACEMENT_METRICS_PORT``)."""

    elastic: ElasticSettings = field(default_factory=ElasticSettings)
    """The elastic planner's guards (``--elastic-*``, ``PHALANX_ELASTIC_*``), its defaults the core's."""

    pin_taint_effect: str = "NoSchedule"
    """Effect of the elastic pool's pin taints (``PHALANX_PIN_TAINT_EFFECT``): ``NoSchedule`` keeps new pods
    away and evicts nothing; ``NoExecute`` also evicts running pods that do not tolerate it."""

    webhook_certs: str = "internal"
    """Where the webhooks' TLS certificate comes from (``--webhook-certs``, ``PHALANX_WEBHOOK_CERTS``):
    ``internal``, the placement manager makes its own CA and certificate, keeps them in the Secret
    ``webhook_cert_secret`` and writes the CA into ``webhook_configurations``; ``files``, it serves
    ``webhook_cert_file`` and ``webhook_key_file`` (cert-manager's or the admin's), and someone else sets
    the configurations' caBundle. Either way a changed certificate is served without a restart."""

    webhook_cert_file: str = ""
    """TLS certificate of the webhooks with ``--webhook-certs=files`` (``PHALANX_WEBHOOK_CERT_FILE``); without
    it (and the key) no webhook is served in that mode, and waiting workers are pinned by the pass alone."""

    webhook_key_file: str = ""
    """Its private key (``PHALANX_WEBHOOK_KEY_FILE``)."""

    webhook_port: int = 9443
    """Port of the webhooks (``PHALANX_WEBHOOK_PORT``); 0 serves none (and checks none)."""

    webhook_bind_address: str = "0.0.0.0"
    """Address the webhooks listen on (``PHALANX_WEBHOOK_BIND_ADDRESS``)."""

    visibility_port: int = 0
    """Port of the visibility endpoint (``PHALANX_VISIBILITY_PORT``): ``phalanx why`` for a user who may read
    only their own namespace, over the webhooks' TLS certificate on ``webhook_bind_address``; 0 serves
    none. It needs the webhooks (their certificate)."""

    webhook_cert_secret: str = "phalanx-placement-webhook-certs"
    """The Secret of internal certificate management, in ``webhook_namespace``
    (``PHALANX_WEBHOOK_CERT_SECRET``)."""

    webhook_namespace: str = "phalanx-system"
    """Namespace of that Secret and of the webhook Service (``--webhook-namespace``; ``POD_NAMESPACE``)."""

    webhook_service: str = "phalanx-placement-webhook"
    """The Service in front of the webhooks (``PHALANX_WEBHOOK_SERVICE``): the name the API server expects
    on the certificate is ``<service>.<namespace>.svc``."""

    webhook_cert_names: tuple[str, ...] = ()
    """Names of the internal serving certificate (``PHALANX_WEBHOOK_CERT_NAMES``, comma-separated; an IP
    address is an IP name); empty means the Service's DNS names (``cert_names``)."""

    webhook_configurations: tuple[str, ...] = ("phalanx-pin-webhook", "phalanx-admission-gate")
    """The MutatingWebhookConfigurations served here (``PHALANX_WEBHOOK_CONFIGURATIONS``, comma-separated):
    checked, and given the CA with internal certificates."""

    webhook_check_seconds: float = 5.0
    """Time between two checks of the certificates and configurations (``PHALANX_WEBHOOK_CHECK_SECONDS``)."""

    gate_bypass_unready_seconds: float = 300.0
    """How long the leader is not ready after it saw a pod created around the admission gate
    (``PHALANX_GATE_BYPASS_UNREADY_SECONDS``)."""

    leader_elect: bool = True
    """Act only while holding the Lease ``lease_namespace/lease_name`` (``--leader-elect``,
    ``PHALANX_LEADER_ELECT``), so that two replicas never both act; off only for a single replica."""

    lease_namespace: str = "phalanx-system"
    """Namespace of the Lease (``--lease-namespace``; ``POD_NAMESPACE`` from the downward API)."""

    lease_name: str = "phalanx-placement"
    """Name of the Lease (``--lease-name``)."""

    lease_duration_seconds: int = 15
    """How long a standby waits on a Lease nobody renews before it takes over (``--lease-duration-seconds``);
    client-go's and kube-scheduler's default."""

    renew_deadline_seconds: float = 10.0
    """A leader that could not renew for this long stops acting and exits (``--renew-deadline-seconds``);
    shorter than the duration, so no two replicas act at once."""

    lease_retry_seconds: float = 2.0
    """Time between two reads of the Lease (``--lease-retry-seconds``)."""

    admission_gates: bool = True
    """Gate pods of scheduler ``phalanx`` at creation and release them group by group in the fair order
    (``--admission-gates``, ``PHALANX_ADMISSION_GATES``; docs/design/admission-gates.md). Off: the gate
    webhook lets pods through ungated and nothing is released (a pod gated before stays gated until a
    replica with gates on releases it)."""

    admit_at_creation: bool = True
    """Let a pod on its own in ungated as it is created when the release pass would release it now, and
    nothing else (``--admit-at-creation``, ``PHALANX_ADMIT_AT_CREATION``;
    ``scheduling.admission.door``). Off: every pod is gated and waits for a pass (about 90 ms more per
    pod on a quiet cluster of 1,000 nodes)."""

    nominate_released: bool = True
    """Nominate each pod the release pass places to the node its plan puts it on, just before its gate
    is removed (``--nominate-released``, ``PHALANX_NOMINATE_RELEASED``; ``kubeio.nominations``):
    kube-scheduler then tries that node alone, one Filter pass on one node instead of every node. Off
    for a kube-scheduler older than v1.35, where ``status.nominatedNodeName`` is its own."""

    gates: GateSettings = field(default_factory=GateSettings)
    """How much the release pass lets into kube-scheduler's queue at once (``--gate-*``,
    ``PHALANX_GATE_*``), its defaults the core's."""

    plan_key_file: str = ""
    """The key that seals each plan written on a pod (``--plan-key-file``, ``PHALANX_PLAN_KEY_FILE``;
    ``kubeio.plan_seal``): a file of at least 32 bytes, the Secret the framework sidecar's scheduler
    mounts too. Needed with ``gates.plan_on_pod``: the sidecar follows only sealed plans."""

    remove_pin_taints: bool = False
    """Take every pin taint off every node and exit (``--remove-pin-taints``), e.g. before uninstalling."""

    remove_admission_gates: bool = False
    """Take the admission gate off every pod that carries it and exit (``--remove-admission-gates``),
    e.g. before uninstalling: nothing else would release a gated pod."""

    log_level: str = "INFO"
    """Python logging level name (``PHALANX_LOG_LEVEL``), given to ``logging.basicConfig`` as it is."""

    @property
    def cert_names(self) -> tuple[str, ...]:
        """The internal serving certificate's names: ``webhook_cert_names``, or the Service's DNS names."""
        if self.webhook_cert_names:
            return self.webhook_cert_names
        service = f"{self.webhook_service}.{self.webhook_namespace}.svc"
        return (service, f"{service}.cluster.local")

    @property
    def serves_webhooks(self) -> bool:
        """Whether this replica serves the webhooks: a port, and a certificate source."""
        files = bool(self.webhook_cert_file and self.webhook_key_file)
        return self.webhook_port != 0 and (self.webhook_certs == "internal" or files)

    @staticmethod
    def parse(argv: Sequence[str] | None, environ: Mapping[str, str]) -> PlacementSettings:
        """Read flags, each defaulting to its environment variable, then to the built-in default.

        Raises:
            SystemExit: ``--help`` (0), or a malformed flag or variable (2, click's message on stderr).
        """
        settings: PlacementSettings = parse(COMMAND, argv, environ, prog="python -m placement")
        return settings


def _problem(settings: PlacementSettings) -> str | None:
    """Why the settings cannot work together, or ``None``."""
    if settings.gates.plan_on_pod and not settings.plan_key_file:
        return "--gate-plan-on-pod needs --plan-key-file: the framework sidecar follows only sealed plans"
    return _lease_problem(settings)


def _lease_problem(settings: PlacementSettings) -> str | None:
    """Why the Lease timings cannot work together, or ``None``."""
    if not settings.leader_elect:
        return None
    if not 0 < settings.renew_deadline_seconds < settings.lease_duration_seconds:
        return "--renew-deadline-seconds must be above 0 and below --lease-duration-seconds"
    if settings.lease_retry_seconds >= settings.renew_deadline_seconds:
        return "--lease-retry-seconds must be below --renew-deadline-seconds"
    return None


AT_LEAST_ONE = click.IntRange(min=1)

SETTINGS = (
    Setting("kubeconfig", "--kubeconfig", ("KUBECONFIG",), help="kubeconfig path; unset: in-cluster"),
    Setting(
        "interval_seconds",
        "--interval-seconds",
        ("PHALANX_PLACEMENT_INTERVAL_SECONDS",),
        SECONDS,
        "seconds between reconcile rounds",
    ),
    Setting(
        "stale_grace_seconds",
        "--stale-grace-seconds",
        ("PHALANX_STALE_GANG_GRACE_SECONDS",),
        SECONDS,
        "seconds a placed gang may run below minMember before it is evicted whole",
    ),
    Setting(
        "metrics_port", "--metrics-port", ("PHALANX_PLACEMENT_METRICS_PORT",), PORT, "/metrics port; 0: none"
    ),
    Setting(
        "elastic.cooldown_seconds",
        "--elastic-cooldown-seconds",
        ("PHALANX_ELASTIC_COOLDOWN_SECONDS",),
        SECONDS,
        "an elastic job moved less than this long ago is not moved again",
    ),
    Setting(
        "elastic.moves_per_job",
        "--elastic-moves-per-job",
        ("PHALANX_ELASTIC_MOVES_PER_JOB",),
        click.IntRange(min=0),
        "workers of one elastic job moved in one round at most",
    ),
    Setting(
        "elastic.moves_per_round",
        "--elastic-moves-per-round",
        ("PHALANX_ELASTIC_MOVES_PER_ROUND",),
        click.IntRange(min=0),
        "workers moved in the whole cluster in one round at most",
    ),
    Setting(
        "elastic.grow_step",
        "--elastic-grow-step",
        ("PHALANX_ELASTIC_GROW_STEP",),
        AT_LEAST_ONE,
        "workers one elastic job grows by in one round at most",
    ),
    Setting(
        "pin_taint_effect",
        "--pin-taint-effect",
        ("PHALANX_PIN_TAINT_EFFECT",),
        click.Choice(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "effect of the elastic pool's pin taints",
    ),
    Setting(
        "webhook_certs",
        "--webhook-certs",
        ("PHALANX_WEBHOOK_CERTS",),
        click.Choice(["internal", "files"]),
        "where the webhooks' TLS certificate comes from",
    ),
    Setting(
        "webhook_cert_file",
        "--webhook-cert-file",
        ("PHALANX_WEBHOOK_CERT_FILE",),
        help="the webhooks' certificate with --webhook-certs=files",
    ),
    Setting("webhook_key_file", "--webhook-key-file", ("PHALANX_WEBHOOK_KEY_FILE",), help="its private key"),
    Setting("webhook_port", "--webhook-port", ("PHALANX_WEBHOOK_PORT",), PORT, "webhooks' port; 0: none"),
    Setting(
        "webhook_bind_address",
        "--webhook-bind-address",
        ("PHALANX_WEBHOOK_BIND_ADDRESS",),
        help="address the webhooks listen on",
    ),
    Setting(
        "visibility_port",
        "--visibility-port",
        ("PHALANX_VISIBILITY_PORT",),
        PORT,
        "port of the visibility endpoint (phalanx why for namespace users); 0: none",
    ),
    Setting(
        "webhook_cert_secret",
        "--webhook-cert-secret",
        ("PHALANX_WEBHOOK_CERT_SECRET",),
        help="the Secret of internal certificate management",
    ),
    Setting(
        "webhook_namespace",
        "--webhook-namespace",
        ("POD_NAMESPACE",),
        help="namespace of that Secret and of the webhook Service",
    ),
    Setting("webhook_service", "--webhook-service", ("PHALANX_WEBHOOK_SERVICE",), help="the webhook Service"),
    Setting(
        "webhook_cert_names",
        "--webhook-cert-names",
        ("PHALANX_WEBHOOK_CERT_NAMES",),
        NAMES,
        "names of the internal serving certificate, comma-separated; unset: the Service's DNS names",
    ),
    Setting(
        "webhook_configurations",
        "--webhook-configurations",
        ("PHALANX_WEBHOOK_CONFIGURATIONS",),
        NAMES,
        "the MutatingWebhookConfigurations served here, comma-separated",
    ),
    Setting(
        "webhook_check_seconds",
        "--webhook-check-seconds",
        ("PHALANX_WEBHOOK_CHECK_SECONDS",),
        SECONDS,
        "seconds between two checks of certificates and configurations",
    ),
    Setting(
        "gate_bypass_unready_seconds",
        "--gate-bypass-unready-seconds",
        ("PHALANX_GATE_BYPASS_UNREADY_SECONDS",),
        SECONDS,
        "seconds the leader is not ready after a pod was created around the gate",
    ),
    Setting(
        "leader_elect",
        "--leader-elect",
        ("PHALANX_LEADER_ELECT",),
        SWITCH,
        "act only while holding the Lease",
        metavar="BOOLEAN",
    ),
    Setting("lease_namespace", "--lease-namespace", ("POD_NAMESPACE",), help="namespace of the Lease"),
    Setting("lease_name", "--lease-name", help="name of the Lease"),
    Setting(
        "lease_duration_seconds",
        "--lease-duration-seconds",
        type=AT_LEAST_ONE,
        help="seconds a standby waits on an unrenewed Lease",
    ),
    Setting(
        "renew_deadline_seconds",
        "--renew-deadline-seconds",
        type=SECONDS,
        help="a leader that could not renew this long stops and exits",
    ),
    Setting(
        "lease_retry_seconds",
        "--lease-retry-seconds",
        type=SECONDS,
        help="seconds between two reads of the Lease",
    ),
    Setting(
        "admission_gates",
        "--admission-gates",
        ("PHALANX_ADMISSION_GATES",),
        SWITCH,
        "gate pods at creation and release them group by group",
        metavar="BOOLEAN",
    ),
    Setting(
        "admit_at_creation",
        "--admit-at-creation",
        ("PHALANX_ADMIT_AT_CREATION",),
        SWITCH,
        "let a pod the release pass would release now in ungated as it is created",
        metavar="BOOLEAN",
    ),
    Setting(
        "nominate_released",
        "--nominate-released",
        ("PHALANX_NOMINATE_RELEASED",),
        SWITCH,
        "nominate each pod the release pass places to its planned node before ungating it",
        metavar="BOOLEAN",
    ),
    Setting(
        "gates.max_unbound_gpus",
        "--gate-max-unbound-gpus",
        ("PHALANX_GATE_MAX_UNBOUND_GPUS",),
        AT_LEAST_ONE,
        "GPUs released and not yet bound, at most (not with --gate-plan-on-pod)",
    ),
    Setting(
        "gates.max_unbound_pods",
        "--gate-max-unbound-pods",
        ("PHALANX_GATE_MAX_UNBOUND_PODS",),
        AT_LEAST_ONE,
        "pods released and not yet bound, at most (not with --gate-plan-on-pod)",
    ),
    Setting(
        "gates.release_ttl",
        "--gate-release-ttl-seconds",
        ("PHALANX_GATE_RELEASE_TTL_SECONDS",),
        SECONDS,
        "seconds a released group not bound counts as in flight",
    ),
    Setting(
        "gates.starve_after",
        "--gate-starve-after-seconds",
        ("PHALANX_GATE_STARVE_AFTER_SECONDS",),
        SECONDS,
        "seconds a kept group waits before it keeps its GPUs from those behind it",
    ),
    Setting(
        "gates.nominate_from_nodes",
        "--gate-nominate-from-nodes",
        ("PHALANX_GATE_NOMINATE_FROM_NODES",),
        click.IntRange(min=0),
        "nominate a released pod on its own only on a cluster of at least this many nodes",
    ),
    Setting(
        "gates.plan_on_pod",
        "--gate-plan-on-pod",
        ("PHALANX_GATE_PLAN_ON_POD",),
        SWITCH,
        "write each released pod's node and GPUs on it, for the framework sidecar (no nominations)",
        metavar="BOOLEAN",
    ),
    Setting(
        "gates.plan_refused_after",
        "--gate-plan-refused-after-seconds",
        ("PHALANX_GATE_PLAN_REFUSED_AFTER_SECONDS",),
        SECONDS,
        "seconds after which a carried plan kube-scheduler still turns down is made on another node",
    ),
    Setting(
        "plan_key_file",
        "--plan-key-file",
        ("PHALANX_PLAN_KEY_FILE",),
        help="file of the key sealing each plan written on a pod (with --gate-plan-on-pod)",
    ),
    Setting(
        "remove_pin_taints",
        "--remove-pin-taints",
        switch=True,
        help="take every pin taint off every node and exit",
    ),
    Setting(
        "remove_admission_gates",
        "--remove-admission-gates",
        switch=True,
        help="take the admission gate off every gated pod and exit",
    ),
    Setting("log_level", "--log-level", (LOG_LEVEL_ENV,), LOG_LEVEL, "Python logging level"),
)
"""Every setting of the placement manager, once: ``python -m placement --help`` is built from it."""

COMMAND = command(SETTINGS, PlacementSettings(), about="phalanx placement manager", check=_problem)
