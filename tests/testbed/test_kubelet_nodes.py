"""The simulated kubelet acts for its nodes as a kubelet would, and only while a test has not stopped it.

It renews each node's Lease and posts its ``Ready`` condition (``testbed.heartbeat``), so the real node
lifecycle controller keeps the node alive; a node whose kubelet a test stopped gets neither, and its
pods are left alone.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject, KubeHttp
from testbed.heartbeat import KUBELET_ANNOTATION, NODE_LEASES, STATUS_REPORT_SECONDS, NodeHeartbeat
from testbed.kubelet import SIMULATED_LABEL, SimKubelet
from testbed.nodes import set_ready
from tests.builders import FakeClock
from tests.kubeio.fake_api import FakeApi, Sent


def recording_http(missing: frozenset[str] = frozenset()) -> FakeApi:
    """An API server that records writes and answers 404 once to a PATCH of each path in ``missing``."""
    left = set(missing)

    def answer(sent: Sent) -> JsonObject:
        if sent.method == "PATCH" and sent.path in left:
            left.discard(sent.path)
            raise NotFoundError(404, "NotFound", sent.path)
        return {}

    return FakeApi(answer=answer, read_only=False)


def calls(http: FakeApi) -> list[tuple[str, str, Any]]:
    """Every request as (method, path, body)."""
    return [(s.method, s.path, s.body) for s in http.sent]


def node(name: str, ready: str = "True", kubelet: str | None = None) -> JsonObject:
    annotations = {KUBELET_ANNOTATION: kubelet} if kubelet else {}
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "labels": {SIMULATED_LABEL: "true"},
            "annotations": annotations,
        },
        "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": "earlier"}]},
    }


def pod(name: str, node_name: str, **meta: Any) -> JsonObject:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", **meta},
        "spec": {"nodeName": node_name, "containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize(
    ("kubelet", "ready", "acts"),
    [
        (None, "True", True),
        (None, "Unknown", True),
        ("stopped", "Unknown", False),
        ("not-ready", "False", False),
    ],
)
def test_pods_are_started_and_deleted_only_while_the_nodes_kubelet_runs(
    kubelet: str | None, ready: str, acts: bool
) -> None:
    """A node the lifecycle controller marked while its kubelet runs is still the kubelet's to run."""
    http = recording_http()
    sim = SimKubelet(cast(KubeHttp, http), clock=lambda: 0.0)
    sim.nodes_replaced([node("n1")])
    sim.node_event("MODIFIED", node("n1", ready, kubelet))
    sim.pod_event("ADDED", pod("p", "n1"))
    sim.pod_event("MODIFIED", pod("q", "n1", deletionTimestamp="2026-01-01T00:00:00Z"))
    assert [method for method, _, _ in calls(http)] == (["PATCH", "DELETE"] if acts else [])


@pytest.mark.parametrize(
    ("status", "value"), [("Unknown", "stopped"), ("False", "not-ready"), ("True", None)]
)
def test_set_ready_tells_the_nodes_kubelet_and_writes_no_condition(status: str, value: str | None) -> None:
    http = recording_http()
    set_ready(cast(KubeHttp, http), "n1", status)
    [(method, path, body)] = calls(http)
    assert (method, path) == ("PATCH", "/api/v1/nodes/n1")
    assert body == {"metadata": {"annotations": {KUBELET_ANNOTATION: value}}}
    with pytest.raises(ValueError, match="Ready status must be one of"):
        set_ready(cast(KubeHttp, http), "n1", "Dead")


def test_the_heartbeat_creates_then_renews_each_lease_owned_by_its_node() -> None:
    http = recording_http(missing=frozenset({f"{NODE_LEASES}/n1"}))
    clock = FakeClock(1_000_000.0)
    beat = NodeHeartbeat(cast(KubeHttp, http), clock=clock, lease_seconds=8)
    beat.nodes_replaced([node("n1")])
    beat.beat_once()
    assert [(m, p) for m, p, _ in calls(http)] == [
        ("PATCH", f"{NODE_LEASES}/n1"),
        ("POST", NODE_LEASES),
        ("PATCH", "/api/v1/nodes/n1/status"),  # a kubelet that starts posts its status at once
    ]
    created = calls(http)[1][2]
    assert created["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"}
    ]
    assert created["spec"]["renewTime"] == "1970-01-12T13:46:40.000000Z"
    http.sent.clear()
    beat.beat_once()
    assert calls(http) == [], "not due yet: renewed every quarter of the Lease"
    clock.now += 2
    beat.beat_once()
    [(method, path, body)] = calls(http)
    assert (method, path) == ("PATCH", f"{NODE_LEASES}/n1")
    assert body["spec"]["renewTime"] == "1970-01-12T13:46:42.000000Z"


def test_a_stopped_kubelet_renews_nothing_and_a_restarted_one_posts_ready_at_once() -> None:
    http = recording_http()
    clock = FakeClock(1_000_000.0)
    beat = NodeHeartbeat(cast(KubeHttp, http), clock=clock, lease_seconds=8)
    beat.nodes_replaced([node("n1", kubelet="stopped")])
    clock.now += 60
    beat.beat_once()
    assert calls(http) == []
    beat.node_event("MODIFIED", node("n1", ready="Unknown"))  # the test restarts it
    beat.beat_once()
    status = [body for method, path, body in calls(http) if path == "/api/v1/nodes/n1/status"]
    [condition] = status[0]["status"]["conditions"]
    assert (condition["status"], condition["reason"]) == ("True", "KubeletReady")
    assert condition["lastTransitionTime"] == condition["lastHeartbeatTime"], "a change: a new transition"


def test_a_not_ready_kubelet_keeps_its_lease_and_reports_false_then_its_status_every_five_minutes() -> None:
    http = recording_http()
    clock = FakeClock(1_000_000.0)
    beat = NodeHeartbeat(cast(KubeHttp, http), clock=clock, lease_seconds=8)
    beat.nodes_replaced([node("n1", kubelet="not-ready")])
    beat.beat_once()
    posted = [body for _, path, body in calls(http) if path.endswith("/status")]
    assert [c["status"] for c in posted[0]["status"]["conditions"]] == ["False"]
    beat.node_event("MODIFIED", node("n1", ready="False", kubelet="not-ready"))
    http.sent.clear()
    clock.now += STATUS_REPORT_SECONDS
    beat.beat_once()
    [(_, _, lease), (_, _, status)] = calls(http)
    assert lease["spec"]["renewTime"]
    [condition] = status["status"]["conditions"]
    assert (condition["status"], condition["lastTransitionTime"]) == ("False", "earlier"), "no change"


def test_nodes_registered_together_renew_a_few_at_a_time_each_within_its_period() -> None:
    """200 nodes seen at once: after the first writes, each beat renews a few, none waits over a period."""
    http = recording_http()
    clock = FakeClock(1_000_000.0)
    beat = NodeHeartbeat(cast(KubeHttp, http), clock=clock, lease_seconds=40)  # renewed every 10 s
    beat.nodes_replaced([node(f"gpu-node-{i}") for i in range(200)])
    beat.beat_once()
    assert len([p for m, p, _ in calls(http) if m == "PATCH" and p.startswith(NODE_LEASES)]) == 200
    last = {f"gpu-node-{i}": clock.now for i in range(200)}
    per_beat = []
    for _ in range(30):  # three periods, a beat a second
        http.sent.clear()
        clock.now += 1
        beat.beat_once()
        renewed = [p.rsplit("/", 1)[1] for m, p, _ in calls(http) if p.startswith(NODE_LEASES)]
        per_beat.append(len(renewed))
        for name in renewed:
            assert clock.now - last[name] <= 10, name
            last[name] = clock.now
    assert all(clock.now - at <= 10 for at in last.values())
    assert max(per_beat) <= 50, per_beat  # 20 a beat on average; all 200 at once before
