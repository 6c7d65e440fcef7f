"""The watch over the webhooks: it says when the API server cannot call one, and puts the CA right itself.

The real HTTPS server and trust check; the configurations are kept in memory (what the API server would
hold), and the Secret too. An untrusted gate webhook gives a Warning event on its configuration, a 0 in
``phalanx_webhook_trusted``, an ERROR line and a reason not to be ready, each once; fixed, a Normal
event, a 1 and readiness. With internal certificates a wrong caBundle is replaced before it is checked.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry

from kubeio.secrets import StoredSecret
from kubeio.webhook_configs import Endpoint, Webhook, WebhookConfiguration
from placement.cert_keeper import CertKeeper
from placement.certificates import KeyPair, make_ca, make_serving
from placement.placement_metrics import PlacementMetrics
from placement.serving_tls import ServingTls
from placement.webhook import GATE_PATH, MUTATE_PATH, serve_webhook
from placement.webhook_trust import OwnServer
from placement.webhook_watch import WebhookWatch
from tests.builders import FakeClock, FakeEvents

SERVICE = ("phalanx-system", "phalanx-placement-webhook")
HOST = "phalanx-placement-webhook.phalanx-system.svc"


@dataclass
class Configs:
    """The webhook configurations the API server holds."""

    held: dict[str, WebhookConfiguration] = field(default_factory=dict)
    written: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    def read(self, name: str) -> WebhookConfiguration | None:
        return self.held.get(name)

    def set_ca_bundle(self, name: str, webhooks: Sequence[str], bundle: bytes) -> None:
        self.written.append((name, tuple(webhooks)))
        config = self.held[name]
        hooks = tuple(
            dataclasses.replace(w, ca_bundle=bundle) if w.name in webhooks else w for w in config.webhooks
        )
        self.held[name] = dataclasses.replace(config, webhooks=hooks)


def configuration(name: str, hook: str, path: str, bundle: bytes) -> WebhookConfiguration:
    webhook = Webhook(hook, Endpoint(SERVICE, HOST, 443, path, HOST), bundle)
    return WebhookConfiguration(name, f"uid-{name}", "2026-01-01T00:00:00Z", (webhook,))


@dataclass
class Setup:
    ca: KeyPair
    tls: ServingTls
    own: OwnServer


@pytest.fixture
def served() -> Iterator[Setup]:
    now = datetime.now(UTC)
    ca = make_ca(now)
    pair = make_serving(ca, [HOST], now)
    tls = ServingTls(lambda: pair)
    server = serve_webhook({MUTATE_PATH: ok, GATE_PATH: ok}, host="127.0.0.1", port=0, tls=tls)
    try:
        own = OwnServer(
            "127.0.0.1", int(server.server_address[1]), {MUTATE_PATH, GATE_PATH}, SERVICE, GATE_PATH
        )
        yield Setup(ca, tls, own)
    finally:
        server.shutdown()
        server.server_close()


def ok(_body: bytes) -> tuple[int, bytes]:
    return 200, b"{}"


def trusted(registry: CollectorRegistry, config: str, webhook: str) -> float | None:
    return registry.get_sample_value("phalanx_webhook_trusted", {"configuration": config, "webhook": webhook})


def test_an_untrusted_gate_webhook_is_told_once_and_its_recovery_too(
    served: Setup, caplog: pytest.LogCaptureFixture
) -> None:
    configs = Configs()
    configs.held["pins"] = configuration("pins", "pins.phalanx.io", MUTATE_PATH, served.ca.cert)
    configs.held["gates"] = configuration("gates", "gates.phalanx.io", GATE_PATH, b"")  # the old recipe
    registry, events, clock = CollectorRegistry(), FakeEvents(), FakeClock(1000.0)
    metrics = PlacementMetrics.create(registry)
    watch = WebhookWatch(
        tls=served.tls,
        configs=configs,
        names=["pins", "gates"],
        own=served.own,
        events=events,
        trusted=metrics.webhook_trusted,
        clock=clock,
        source="the files tls.crt and tls.key",
        report_every=600,
    )
    assert watch.not_ready() == ["the webhooks have not been checked yet"]
    with caplog.at_level(logging.ERROR):
        watch.check_once()
        clock.now += 5
        watch.check_once()
    assert trusted(registry, "pins", "pins.phalanx.io") == 1
    assert trusted(registry, "gates", "gates.phalanx.io") == 0
    (reason,) = watch.not_ready()
    assert reason.startswith(
        "the API server cannot call webhook gates.phalanx.io of gates: its caBundle is empty"
    )
    assert [(kind, name, type_, why) for kind, name, type_, why, _ in events.events] == [
        ("MutatingWebhookConfiguration", "gates", "Warning", "WebhookUntrusted")
    ], "once while the reason stays"
    message = events.events[0][4]
    assert "pods of scheduler phalanx are created without the admission gate" in message
    assert "set caBundle of every webhook here to the CA that signed the certificate in the files" in message
    assert [r.levelname for r in caplog.records if "cannot call webhook" in r.getMessage()] == ["ERROR"]

    clock.now += 600
    watch.check_once()
    assert len(events.events) == 2, "told again after report_every"

    configs.set_ca_bundle("gates", ["gates.phalanx.io"], served.ca.cert)
    watch.check_once()
    assert trusted(registry, "gates", "gates.phalanx.io") == 1
    assert watch.not_ready() == []
    assert events.events[-1][2:4] == ("Normal", "WebhookTrusted")
    gate = watch.gate()
    assert gate is not None and gate[0].name == "gates"


def test_a_deleted_configuration_is_no_longer_checked_nor_counted(served: Setup) -> None:
    configs = Configs({"gates": configuration("gates", "gates.phalanx.io", GATE_PATH, b"")})
    registry = CollectorRegistry()
    watch = WebhookWatch(
        tls=served.tls,
        configs=configs,
        names=["gates"],
        own=served.own,
        events=FakeEvents(),
        trusted=PlacementMetrics.create(registry).webhook_trusted,
        clock=FakeClock(1000.0),
        source="the files",
    )
    watch.check_once()
    assert trusted(registry, "gates", "gates.phalanx.io") == 0 and watch.not_ready()
    del configs.held["gates"]  # how an admin turns gating off
    watch.check_once()
    assert trusted(registry, "gates", "gates.phalanx.io") is None
    assert watch.not_ready() == [] and watch.gate() is None


def test_with_gates_off_an_untrusted_gate_webhook_does_not_make_the_replica_unready(served: Setup) -> None:
    configs = Configs({"gates": configuration("gates", "gates.phalanx.io", GATE_PATH, b"")})
    watch = WebhookWatch(
        tls=served.tls,
        configs=configs,
        names=["gates"],
        own=served.own,
        events=FakeEvents(),
        trusted=PlacementMetrics.create(CollectorRegistry()).webhook_trusted,
        clock=FakeClock(1000.0),
        source="the files",
        gates=False,
    )
    watch.check_once()
    assert watch.not_ready() == []


@dataclass
class Secrets:
    """One Secret as the API server would keep it (no races here: tests/e2e has the real ones)."""

    data: dict[str, bytes] | None = None

    def read(self, namespace: str, name: str) -> StoredSecret | None:
        return None if self.data is None else StoredSecret(namespace, name, dict(self.data), {})

    def create(self, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> bool:
        self.data = dict(data)
        return True

    def update(self, secret: StoredSecret, data: Mapping[str, bytes]) -> bool:
        self.data = dict(data)
        return True


def test_internal_certificates_are_served_and_their_ca_written_into_every_configuration() -> None:
    keeper = CertKeeper(Secrets(), "phalanx-system", "certs", names=[HOST], clock=lambda: datetime.now(UTC))
    tls = ServingTls(keeper.serving)
    server = serve_webhook({MUTATE_PATH: ok, GATE_PATH: ok}, host="127.0.0.1", port=0, tls=tls)
    try:
        own = OwnServer(
            "127.0.0.1", int(server.server_address[1]), {MUTATE_PATH, GATE_PATH}, SERVICE, GATE_PATH
        )
        wrong = make_ca(datetime.now(UTC)).cert
        configs = Configs(
            {
                "pins": configuration("pins", "pins.phalanx.io", MUTATE_PATH, b""),
                "gates": configuration("gates", "gates.phalanx.io", GATE_PATH, wrong),
            }
        )
        registry, events = CollectorRegistry(), FakeEvents()
        watch = WebhookWatch(
            tls=tls,
            configs=configs,
            names=["pins", "gates"],
            own=own,
            events=events,
            trusted=PlacementMetrics.create(registry).webhook_trusted,
            clock=FakeClock(1000.0),
            source="the Secret phalanx-system/certs",
            keeper=keeper,
        )
        trusts = watch.check_once()
        assert [t.problem for t in trusts] == [None, None]
        assert configs.written == [("pins", ("pins.phalanx.io",)), ("gates", ("gates.phalanx.io",))]
        assert keeper.certs is not None
        assert all(w.ca_bundle == keeper.certs.ca_bundle for c in configs.held.values() for w in c.webhooks)
        assert events.events == [] and watch.not_ready() == []
        watch.check_once()
        assert len(configs.written) == 2, "nothing written while the CA is right"
    finally:
        server.shutdown()
        server.server_close()


def test_a_replica_without_a_certificate_says_so_for_every_webhook(served: Setup) -> None:
    configs = Configs({"gates": configuration("gates", "gates.phalanx.io", GATE_PATH, served.ca.cert)})
    watch = WebhookWatch(
        tls=ServingTls(lambda: None),
        configs=configs,
        names=["gates"],
        own=served.own,
        events=FakeEvents(),
        trusted=PlacementMetrics.create(CollectorRegistry()).webhook_trusted,
        clock=FakeClock(1000.0),
        source="the files /etc/phalanx/webhook/tls.crt and tls.key",
    )
    (trust,) = watch.check_once()
    assert trust.problem == (
        "this replica has no certificate to serve yet (the files /etc/phalanx/webhook/tls.crt and tls.key)"
    )
