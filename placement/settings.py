"""Placement manager settings: flags, falling back to environment variables, in one place."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kubeio.config import LOG_LEVEL_ENV, positive_number


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

    elastic_cooldown_seconds: float = 60.0
    """An elastic job moved less than this long ago is not moved again
    (``PHALANX_ELASTIC_COOLDOWN_SECONDS``)."""

    elastic_moves_per_job: int = 1
    """Workers of one elastic job moved in one pass at most (``PHALANX_ELASTIC_MOVES_PER_JOB``)."""

    elastic_moves_per_round: int = 4
    """Workers moved in the whole cluster in one pass at most (``PHALANX_ELASTIC_MOVES_PER_ROUND``)."""

    elastic_grow_step: int = 32
    """Workers one elastic job grows by in one pass at most (``PHALANX_ELASTIC_GROW_STEP``): each is a pod
    the operator creates and kube-scheduler places, so growth is paced; shrinking is not."""

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

    gate_max_unbound_gpus: int = 128
    """GPUs released and not yet bound, at most (``PHALANX_GATE_MAX_UNBOUND_GPUS``)."""

    gate_max_unbound_pods: int = 256
    """Pods released and not yet bound, at most (``PHALANX_GATE_MAX_UNBOUND_PODS``)."""

    gate_release_ttl_seconds: float = 60.0
    """A released group not bound after this long stops counting as in flight
    (``PHALANX_GATE_RELEASE_TTL_SECONDS``)."""

    gate_starve_after_seconds: float = 300.0
    """A group kept gated this long keeps its GPUs from groups behind it
    (``PHALANX_GATE_STARVE_AFTER_SECONDS``)."""

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
        """Read flags, each defaulting to its environment variable, then to the built-in default."""
        defaults = PlacementSettings()
        parser = argparse.ArgumentParser(prog="python -m placement", description="phalanx placement manager")
        parser.add_argument("--kubeconfig", default=environ.get("KUBECONFIG") or None)
        parser.add_argument(
            "--interval-seconds",
            type=positive_number,
            default=environ.get("PHALANX_PLACEMENT_INTERVAL_SECONDS", defaults.interval_seconds),
        )
        parser.add_argument(
            "--stale-grace-seconds",
            type=positive_number,
            default=environ.get("PHALANX_STALE_GANG_GRACE_SECONDS", defaults.stale_grace_seconds),
        )
        metrics_port = environ.get("PHALANX_PLACEMENT_METRICS_PORT", defaults.metrics_port)
        parser.add_argument("--metrics-port", type=int, default=metrics_port)
        parser.add_argument(
            "--elastic-cooldown-seconds",
            type=positive_number,
            default=environ.get("PHALANX_ELASTIC_COOLDOWN_SECONDS", defaults.elastic_cooldown_seconds),
        )
        parser.add_argument(
            "--elastic-moves-per-job",
            type=int,
            default=environ.get("PHALANX_ELASTIC_MOVES_PER_JOB", defaults.elastic_moves_per_job),
        )
        parser.add_argument(
            "--elastic-moves-per-round",
            type=int,
            default=environ.get("PHALANX_ELASTIC_MOVES_PER_ROUND", defaults.elastic_moves_per_round),
        )
        parser.add_argument(
            "--elastic-grow-step",
            type=int,
            default=environ.get("PHALANX_ELASTIC_GROW_STEP", defaults.elastic_grow_step),
        )
        parser.add_argument(
            "--pin-taint-effect",
            choices=("NoSchedule", "PreferNoSchedule", "NoExecute"),
            default=environ.get("PHALANX_PIN_TAINT_EFFECT", defaults.pin_taint_effect),
        )
        parser.add_argument(
            "--webhook-certs",
            choices=("internal", "files"),
            default=environ.get("PHALANX_WEBHOOK_CERTS", defaults.webhook_certs),
        )
        for flag, env, text in (
            ("--webhook-cert-secret", "PHALANX_WEBHOOK_CERT_SECRET", defaults.webhook_cert_secret),
            ("--webhook-service", "PHALANX_WEBHOOK_SERVICE", defaults.webhook_service),
            ("--webhook-cert-names", "PHALANX_WEBHOOK_CERT_NAMES", ""),
            (
                "--webhook-configurations",
                "PHALANX_WEBHOOK_CONFIGURATIONS",
                ",".join(defaults.webhook_configurations),
            ),
        ):
            parser.add_argument(flag, default=environ.get(env, text))
        parser.add_argument(
            "--webhook-namespace", default=environ.get("POD_NAMESPACE") or defaults.webhook_namespace
        )
        for flag, env, seconds in (
            ("--webhook-check-seconds", "PHALANX_WEBHOOK_CHECK_SECONDS", defaults.webhook_check_seconds),
            (
                "--gate-bypass-unready-seconds",
                "PHALANX_GATE_BYPASS_UNREADY_SECONDS",
                defaults.gate_bypass_unready_seconds,
            ),
        ):
            parser.add_argument(flag, type=positive_number, default=environ.get(env, seconds))
        parser.add_argument("--webhook-cert-file", default=environ.get("PHALANX_WEBHOOK_CERT_FILE", ""))
        parser.add_argument("--webhook-key-file", default=environ.get("PHALANX_WEBHOOK_KEY_FILE", ""))
        parser.add_argument(
            "--webhook-port", type=int, default=environ.get("PHALANX_WEBHOOK_PORT", defaults.webhook_port)
        )
        parser.add_argument(
            "--visibility-port",
            type=int,
            default=environ.get("PHALANX_VISIBILITY_PORT", defaults.visibility_port),
        )
        parser.add_argument(
            "--webhook-bind-address",
            default=environ.get("PHALANX_WEBHOOK_BIND_ADDRESS", defaults.webhook_bind_address),
        )
        parser.add_argument(
            "--leader-elect",
            type=_flag,
            default=environ.get("PHALANX_LEADER_ELECT", str(defaults.leader_elect)),
        )
        parser.add_argument(
            "--lease-namespace", default=environ.get("POD_NAMESPACE") or defaults.lease_namespace
        )
        parser.add_argument("--lease-name", default=defaults.lease_name)
        parser.add_argument("--lease-duration-seconds", type=int, default=defaults.lease_duration_seconds)
        parser.add_argument(
            "--renew-deadline-seconds", type=positive_number, default=defaults.renew_deadline_seconds
        )
        parser.add_argument(
            "--lease-retry-seconds", type=positive_number, default=defaults.lease_retry_seconds
        )
        parser.add_argument(
            "--admission-gates",
            type=_flag,
            default=environ.get("PHALANX_ADMISSION_GATES", str(defaults.admission_gates)),
        )
        for flag, env, default in (
            ("--gate-max-unbound-gpus", "PHALANX_GATE_MAX_UNBOUND_GPUS", defaults.gate_max_unbound_gpus),
            ("--gate-max-unbound-pods", "PHALANX_GATE_MAX_UNBOUND_PODS", defaults.gate_max_unbound_pods),
        ):
            parser.add_argument(flag, type=int, default=environ.get(env, default))
        for flag, env, seconds in (
            (
                "--gate-release-ttl-seconds",
                "PHALANX_GATE_RELEASE_TTL_SECONDS",
                defaults.gate_release_ttl_seconds,
            ),
            (
                "--gate-starve-after-seconds",
                "PHALANX_GATE_STARVE_AFTER_SECONDS",
                defaults.gate_starve_after_seconds,
            ),
        ):
            parser.add_argument(flag, type=positive_number, default=environ.get(env, seconds))
        parser.add_argument("--remove-pin-taints", action="store_true")
        parser.add_argument("--remove-admission-gates", action="store_true")
        args = parser.parse_args(argv)
        if args.leader_elect and not 0 < args.renew_deadline_seconds < args.lease_duration_seconds:
            parser.error("--renew-deadline-seconds must be above 0 and below --lease-duration-seconds")
        if args.leader_elect and args.lease_retry_seconds >= args.renew_deadline_seconds:
            parser.error("--lease-retry-seconds must be below --renew-deadline-seconds")
        return PlacementSettings(
            kubeconfig=args.kubeconfig,
            interval_seconds=positive_number(args.interval_seconds),
            stale_grace_seconds=positive_number(args.stale_grace_seconds),
            metrics_port=int(args.metrics_port),
            elastic_cooldown_seconds=positive_number(args.elastic_cooldown_seconds),
            elastic_moves_per_job=int(args.elastic_moves_per_job),
            elastic_moves_per_round=int(args.elastic_moves_per_round),
            elastic_grow_step=_at_least_one(int(args.elastic_grow_step), "--elastic-grow-step", parser),
            pin_taint_effect=str(args.pin_taint_effect),
            webhook_certs=str(args.webhook_certs),
            webhook_cert_file=str(args.webhook_cert_file),
            webhook_key_file=str(args.webhook_key_file),
            webhook_port=int(args.webhook_port),
            webhook_bind_address=str(args.webhook_bind_address),
            visibility_port=int(args.visibility_port),
            webhook_cert_secret=str(args.webhook_cert_secret),
            webhook_namespace=str(args.webhook_namespace),
            webhook_service=str(args.webhook_service),
            webhook_cert_names=_names(str(args.webhook_cert_names)),
            webhook_configurations=_names(str(args.webhook_configurations)),
            webhook_check_seconds=positive_number(args.webhook_check_seconds),
            gate_bypass_unready_seconds=positive_number(args.gate_bypass_unready_seconds),
            leader_elect=bool(args.leader_elect),
            lease_namespace=str(args.lease_namespace),
            lease_name=str(args.lease_name),
            lease_duration_seconds=int(args.lease_duration_seconds),
            renew_deadline_seconds=float(args.renew_deadline_seconds),
            lease_retry_seconds=float(args.lease_retry_seconds),
            admission_gates=bool(args.admission_gates),
            gate_max_unbound_gpus=_at_least_one(
                int(args.gate_max_unbound_gpus), "--gate-max-unbound-gpus", parser
            ),
            gate_max_unbound_pods=_at_least_one(
                int(args.gate_max_unbound_pods), "--gate-max-unbound-pods", parser
            ),
            gate_release_ttl_seconds=positive_number(args.gate_release_ttl_seconds),
            gate_starve_after_seconds=positive_number(args.gate_starve_after_seconds),
            remove_pin_taints=bool(args.remove_pin_taints),
            remove_admission_gates=bool(args.remove_admission_gates),
            log_level=environ.get(LOG_LEVEL_ENV, defaults.log_level),
        )


def _flag(text: str) -> bool:
    """``true``/``false`` (any case, also 1/0, yes/no), as flags and environment variables are written."""
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    msg = f"expected true or false, got {text!r}"
    raise argparse.ArgumentTypeError(msg)


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list, blanks dropped."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def _at_least_one(value: int, flag: str, parser: argparse.ArgumentParser) -> int:
    if value < 1:
        parser.error(f"{flag} must be at least 1")
    return value
