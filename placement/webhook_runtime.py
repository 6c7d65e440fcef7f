"""The webhooks of a placement manager replica, wired: certificates, server, checks.

``start_webhooks`` builds what ``--webhook-certs`` asks for (the Secret keeper of internal management,
or the mounted files), the HTTPS server of both webhooks, and the watch that keeps certificates and CA
bundles current and checks that the API server can call each webhook (``placement.webhook_watch``). The
first check runs before it returns, so a replica with internal certificates serves its certificate
from the start, then one every ``--webhook-check-seconds`` on a daemon thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from kubeio.http import KubeHttp
from kubeio.mpijobs import MpiJobWriter
from kubeio.ports import EventSink
from kubeio.secrets import SecretStore
from kubeio.serving import BackgroundServer
from kubeio.webhook_configs import WebhookConfigs
from placement.cert_keeper import CertKeeper
from placement.placement_metrics import PlacementMetrics
from placement.placement_settings import PlacementSettings
from placement.serving_tls import ServingTls, files_loader
from placement.webhook import GATE_PATH, MUTATE_PATH, Door, GateWebhook, PinWebhook, serve_webhook
from placement.webhook_trust import OwnServer
from placement.webhook_watch import WebhookWatch

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunningWebhooks:
    """The webhook server, the watch over it, and the certificate it serves (the visibility endpoint too)."""

    server: BackgroundServer
    watch: WebhookWatch
    tls: ServingTls


def start_webhooks(
    settings: PlacementSettings,
    http: KubeHttp,
    events: EventSink,
    metrics: PlacementMetrics,
    stop: threading.Event,
    *,
    door: Door | None = None,
) -> RunningWebhooks | None:
    """Serve the pin and gate webhooks and watch them; ``None`` when this replica serves none.

    ``door`` lets a pod in ungated as it is created (the leader's release pass decides; ``None``: every
    pod of scheduler ``phalanx`` is gated).

    Raises:
        OSError: the webhook port is taken.
    """
    if not settings.serves_webhooks:
        log.info(
            "webhooks off (--webhook-port 0, or --webhook-certs=files without --webhook-cert-file and "
            "--webhook-key-file): waiting workers are pinned by the pass, pods are created ungated"
        )
        return None
    keeper = None
    if settings.webhook_certs == "internal":
        keeper = CertKeeper(
            SecretStore(http),
            settings.webhook_namespace,
            settings.webhook_cert_secret,
            names=settings.cert_names,
            clock=lambda: datetime.now(UTC),
        )
        tls, source = ServingTls(keeper.serving), f"the Secret {keeper.secret}"
    else:
        cert, key = settings.webhook_cert_file, settings.webhook_key_file
        tls, source = ServingTls(files_loader(cert, key)), f"the files {cert} and {key}"
    pins = PinWebhook(
        MpiJobWriter(http),
        events,
        effect=settings.pin_taint_effect,
        on_pin=metrics.elastic_actions.labels("pin_at_creation").inc,
    )
    gates = GateWebhook(enabled=settings.admission_gates, door=door)
    routes = {MUTATE_PATH: pins.review, GATE_PATH: gates.review}
    server = serve_webhook(routes, host=settings.webhook_bind_address, port=settings.webhook_port, tls=tls)
    own = OwnServer(
        host=_dialable(settings.webhook_bind_address),
        port=int(server.server_address[1]),
        paths=frozenset(routes),
        service=(settings.webhook_namespace, settings.webhook_service),
        gate_path=GATE_PATH,
    )
    watch = WebhookWatch(
        tls=tls,
        configs=WebhookConfigs(http),
        names=settings.webhook_configurations,
        own=own,
        events=events,
        trusted=metrics.webhook_trusted,
        clock=time.monotonic,
        source=source,
        keeper=keeper,
        gates=settings.admission_gates,
    )
    try:
        watch.check_once()
    except Exception:  # the watch thread tries again
        log.exception("first webhook check failed")
    threading.Thread(
        target=watch.run, args=(stop, settings.webhook_check_seconds), name="webhook-watch", daemon=True
    ).start()
    return RunningWebhooks(server, watch, tls)


def _dialable(bind_address: str) -> str:
    """Where this replica reaches its own server: loopback when it listens on every address."""
    if bind_address in ("", "0.0.0.0"):
        return "127.0.0.1"
    if bind_address == "::":
        return "::1"
    return bind_address
