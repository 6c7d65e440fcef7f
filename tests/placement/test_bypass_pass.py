"""Pods created around the admission gate: reported once each, whatever let them through, and only those.

A pod of scheduler phalanx without the gate webhook's stamp, created after the gate configuration in a
namespace the configuration selects, bypassed the gate, bound or not. Stamped pods (gated, released),
pods of other schedulers, of the control plane's namespaces, created before the configuration existed
or before the lookback, are not reported; without a gate configuration nothing is.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubeio.webhook_configs import Endpoint, Webhook, WebhookConfiguration
from placement.bypass_pass import LOOKBACK, BypassPass
from tests.builders import FakeClock, FakeCluster, FakeEvents, a_pod

CONFIGURED = "2026-06-01T11:00:00Z"
NOW = datetime.fromisoformat("2026-06-01T12:00:00Z").timestamp()
SELECTOR = {
    "matchExpressions": [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "phalanx-system"],
        }
    ]
}
GATE = Webhook(
    "gates.phalanx.io",
    Endpoint(None, "127.0.0.1", 9443, "/gate-pods", "127.0.0.1"),
    b"",
    SELECTOR,
)
CONFIG = WebhookConfiguration("phalanx-admission-gate", "uid-gate", CONFIGURED, (GATE,))


def at(seconds_before_now: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_before_now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def detector(
    cluster: FakeCluster, events: FakeEvents, clock: FakeClock, counted: list[int], *, gate: bool = True
) -> BypassPass:
    return BypassPass(
        cluster,
        events,
        gate=lambda: (CONFIG, GATE) if gate else None,
        clock=clock,
        window=300,
        on_bypass=lambda: counted.append(1),
    )


def test_only_unstamped_phalanx_pods_the_webhook_was_called_for_are_reported_once() -> None:
    cluster = FakeCluster().add(
        a_pod("around").gpus(1).created(at(30)).build(),
        a_pod("around-and-bound").gpus(1).created(at(20)).on("n1").build(),
        a_pod("gated").gpus(1).created(at(30)).gated().stamped().build(),
        a_pod("released").gpus(1).created(at(30)).stamped().build(),
        a_pod("other-scheduler").gpus(1).created(at(30)).scheduler("default-scheduler").build(),
        a_pod("control-plane", "kube-system").gpus(1).created(at(30)).build(),
        a_pod("before-the-gate").gpus(1).created("2026-06-01T10:59:59Z").build(),
        a_pod("long-ago").gpus(1).created(at(LOOKBACK + 1)).build(),
    )
    events, counted, clock = FakeEvents(), list[int](), FakeClock(NOW)
    bypass = detector(cluster, events, clock, counted)
    assert sorted(p.name for p in bypass.run()) == ["around", "around-and-bound"]
    assert sorted((kind, name, type_, reason) for kind, name, type_, reason, _ in events.events) == [
        ("Pod", "around", "Warning", "GateBypassed"),
        ("Pod", "around-and-bound", "Warning", "GateBypassed"),
    ]
    assert "MutatingWebhookConfiguration phalanx-admission-gate" in events.events[0][4]
    assert counted == [1, 1]
    clock.now += 5
    assert bypass.run() == [], "each pod once"
    assert len(events.events) == 2


def test_not_ready_for_the_window_after_the_last_bypass() -> None:
    cluster = FakeCluster()
    events, counted, clock = FakeEvents(), list[int](), FakeClock(NOW)
    bypass = detector(cluster, events, clock, counted)
    assert bypass.run() == [] and bypass.recent() == []
    cluster.add(a_pod("late").gpus(1).created(at(1)).build())
    bypass.run()
    clock.now += 299
    assert bypass.recent() == [
        "pod ml/late was created around the admission gate 299s ago (events: GateBypassed)"
    ]
    clock.now += 1
    assert bypass.recent() == []


def test_without_a_gate_configuration_nothing_is_a_bypass() -> None:
    cluster = FakeCluster().add(a_pod("ungated").gpus(1).created(at(30)).build())
    events, counted = FakeEvents(), list[int]()
    assert detector(cluster, events, FakeClock(NOW), counted, gate=False).run() == []
    assert events.events == [] and counted == []
