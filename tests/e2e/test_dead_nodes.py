"""A node dies under a running gang, as in a real cluster: the real controllers mark it, phalanx acts.

The test stops the node's simulated kubelet (``Testbed.set_node_ready``): its Lease is no longer renewed,
so kube-controller-manager's node lifecycle controller marks the node ``Ready=Unknown`` and taints it
``node.kubernetes.io/unreachable`` after ``--node-monitor-grace-period`` (15 s on the session's bed). The
placement manager evicts the gang whole after its grace; the taint eviction controller evicts a pod that
tolerates the taint for 5 s once the 5 s are over; and when the dead node is deleted, the pod garbage
collector deletes the pods left on it, whose deletions a dead kubelet could never complete.
"""

from __future__ import annotations

import time
from datetime import datetime

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    double_booked,
    events_for,
    get_pod,
    gpu_pod,
    list_pods,
    member,
    podgroup,
    running,
    wait_for,
)

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject
from testbed.heartbeat import NODE_LEASES
from tests.e2e.conftest import NODE_GRACE_SECONDS, session_nodes, why_json

pytestmark = pytest.mark.both_modes

UNREACHABLE = "node.kubernetes.io/unreachable"


def _pods(testbed: Testbed, namespace: str, prefix: str) -> dict[str, JsonObject]:
    return {
        p["metadata"]["name"]: p
        for p in list_pods(testbed.http, namespace)
        if p["metadata"]["name"].startswith(prefix)
    }


def _running_on(testbed: Testbed, namespace: str, names: list[str]) -> dict[str, str] | None:
    """The node of each pod in ``names`` once all of them are Running, else None."""
    pods = _pods(testbed, namespace, "")
    if not all(n in pods and running(pods[n]) for n in names):
        return None
    return {n: pods[n]["spec"]["nodeName"] for n in names}


def _event(testbed: Testbed, namespace: str, name: str, reason: str, text: str) -> str | None:
    for event in events_for(testbed.http, namespace, name):
        if event["reason"] == reason and text in event["message"]:
            return str(event["message"])
    return None


def _node(testbed: Testbed, name: str) -> JsonObject | None:
    try:
        return testbed.http.request("GET", f"/api/v1/nodes/{name}")
    except NotFoundError:
        return None


def _taints(node: JsonObject | None) -> set[tuple[str, str]]:
    return {(t["key"], t["effect"]) for t in ((node or {}).get("spec") or {}).get("taints") or []}


def _ready(node: JsonObject | None) -> str | None:
    conditions = ((node or {}).get("status") or {}).get("conditions") or []
    return next((str(c["status"]) for c in conditions if c["type"] == "Ready"), None)


def _last_renewal(testbed: Testbed, name: str) -> float:
    """When the node's Lease was last renewed, in seconds since the epoch (the machine's clock)."""
    lease = testbed.http.request("GET", f"{NODE_LEASES}/{name}")
    stamp = str(lease["spec"]["renewTime"]).replace("Z", "+00:00")
    return datetime.fromisoformat(stamp).timestamp()


def _evicted_by_taint(pod: JsonObject | None) -> bool:
    conditions = ((pod or {}).get("status") or {}).get("conditions") or []
    return any(
        c["type"] == "DisruptionTarget" and c.get("reason") == "DeletionByTaintManager" for c in conditions
    )


def _deleted_by_taint(pod: JsonObject | None) -> bool:
    return _evicted_by_taint(pod) and bool(((pod or {}).get("metadata") or {}).get("deletionTimestamp"))


def _gone(testbed: Testbed, namespace: str, names: list[str]) -> bool:
    return not set(names) & set(_pods(testbed, namespace, ""))


def test_a_dead_node_is_marked_by_the_real_controllers_and_its_gang_is_placed_again_elsewhere(
    testbed: Testbed, namespace: str
) -> None:
    # 6 of 8 GPUs per member: the two members need two nodes, and the dead node keeps 2 GPUs free, one for
    # a pod that tolerates the node being unreachable for 5 s.
    create_podgroup(testbed.http, namespace, podgroup("dead", 2))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"dead-{i}", "dead", 6))
    nodes = wait_for(
        "the gang running", lambda: _running_on(testbed, namespace, ["dead-0", "dead-1"]), timeout=60
    )
    assert len(set(nodes.values())) == 2, f"6-GPU members need a node each: {nodes}"
    dead = nodes["dead-1"]
    tolerant = gpu_pod("tolerant", 1, node_selector={"kubernetes.io/hostname": dead})
    toleration = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
    tolerant["spec"]["tolerations"] = [toleration]
    create_pod(testbed.http, namespace, tolerant)
    wait_for("tolerant running", lambda: _running_on(testbed, namespace, ["tolerant"]), timeout=60)

    started = time.monotonic()
    testbed.set_node_ready(dead, "Unknown")  # its kubelet stops: no Lease renewal, no status
    deleted = False
    try:
        wait_for(
            "the node lifecycle controller's unreachable taints",
            lambda: (
                {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= _taints(_node(testbed, dead))
            ),
            timeout=NODE_GRACE_SECONDS + 30,
        )
        tainted_at = time.monotonic()
        silent = time.time() - _last_renewal(testbed, dead)
        print(f"{dead} tainted {tainted_at - started:.1f}s after the stop, {silent:.1f}s after its Lease")
        # The grace period runs from the Lease's last renewal, which came up to a renewal interval before
        # the kubelet stopped: the lower bound is measured from the renewal, not from the stop.
        assert silent >= NODE_GRACE_SECONDS - 0.5, "not before the grace period"
        assert _ready(_node(testbed, dead)) == "Unknown"

        evicted = wait_for(
            "GangEvicted naming the dead node",
            lambda: _event(testbed, namespace, "dead", "GangEvicted", f"dead-1 on node {dead}, not Ready"),
            timeout=testbed.placement_grace + 30,
        )
        print(f"evicted {time.monotonic() - started:.1f}s after the kubelet stopped: {evicted}")
        assert evicted.startswith("gang " + namespace + "/dead: only 1 of 2 members running (1 lost: ")
        wait_for(
            "the survivor deleted", lambda: "dead-0" not in _pods(testbed, namespace, "dead-"), timeout=30
        )
        stuck = get_pod(testbed.http, namespace, "dead-1")
        assert stuck["metadata"].get("deletionTimestamp"), "the member on the dead node was evicted too"

        # The taint eviction controller evicts the pod that tolerates the taint for 5 s, once they are over:
        # it marks the pod (DisruptionTarget) and then deletes it, two writes a moment apart, so the wait
        # is for both (reading the pod between them found no deletion on a loaded machine).
        wait_for(
            "tolerant evicted by the taint eviction controller",
            lambda: _deleted_by_taint(get_pod(testbed.http, namespace, "tolerant")),
            timeout=40,
        )
        print(f"tolerant evicted {time.monotonic() - tainted_at:.1f}s after the taint (tolerationSeconds 5)")
        assert time.monotonic() - tainted_at >= 4.5

        # The gang's controller re-creates it: it is planned whole again, never on the dead node.
        for i in (2, 3):
            create_pod(testbed.http, namespace, member(f"dead-{i}", "dead", 6))
        again = wait_for(
            "the gang running again",
            lambda: _running_on(testbed, namespace, ["dead-2", "dead-3"]),
            timeout=60,
        )
        assert dead not in again.values(), f"placed on the dead node: {again}"
        assert len(set(again.values())) == 2

        # What phalanx says of the dead node, asked for a pod that only it could take and that tolerates
        # every taint (kube-scheduler's own filters let it through): not Ready.
        probe = gpu_pod("probe", 1, node_selector={"kubernetes.io/hostname": dead})
        probe["spec"]["tolerations"] = [{"operator": "Exists"}]
        create_pod(testbed.http, namespace, probe)
        answer = why_json(testbed, f"{namespace}/probe")
        print(f"probe: {answer['verdict']}; nodes: {answer['nodes']}")
        assert any("not Ready" in group["message"] and group["nodes"] == [dead] for group in answer["nodes"])
        assert not get_pod(testbed.http, namespace, "probe")["spec"].get("nodeName")
        assert double_booked(list_pods(testbed.http)) == []

        # The admin deletes the dead node: the pod garbage collector deletes the pods left on it.
        testbed.http.request("DELETE", f"/api/v1/nodes/{dead}")
        deleted, gone_at = True, time.monotonic()
        wait_for(
            "dead-1 and tolerant collected",
            lambda: _gone(testbed, namespace, ["dead-1", "tolerant"]),
            timeout=150,
        )
        print(f"the pods of the deleted node collected {time.monotonic() - gone_at:.1f}s after its deletion")
    finally:
        if deleted:
            testbed.add_nodes([spec for spec in session_nodes() if spec.name == dead])
        else:
            testbed.set_node_ready(dead, "True")
        wait_for(  # as the next tests need it
            f"{dead} Ready and untainted",
            lambda: _ready(_node(testbed, dead)) == "True" and not _taints(_node(testbed, dead)),
            timeout=60,
        )
