"""A node dies under a running gang: the gang is evicted whole, placed again, and filter says why.

The test bed runs no node lifecycle controller, so the node is made not Ready as that controller would
mark it (``Ready=Unknown``, ``Testbed.set_node_ready``), and the simulated kubelet stops acting for it.
"""

from __future__ import annotations

import time

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

from kubeio.http import JsonObject


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


def test_a_gang_on_a_node_that_goes_not_ready_is_evicted_whole_and_placed_again_elsewhere(
    testbed: Testbed, namespace: str
) -> None:
    # 6 of 8 GPUs per member: the two members need two nodes, and the dead node keeps 2 GPUs free in
    # kube-scheduler's eyes, so that it asks phalanx about that node for the probe below.
    create_podgroup(testbed.http, namespace, podgroup("dead", 2))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"dead-{i}", "dead", 6))
    nodes = wait_for(
        "the gang running", lambda: _running_on(testbed, namespace, ["dead-0", "dead-1"]), timeout=60
    )
    assert len(set(nodes.values())) == 2, f"6-GPU members need a node each: {nodes}"
    dead = nodes["dead-1"]
    started = time.monotonic()
    testbed.set_node_ready(dead, "Unknown")
    try:
        evicted = wait_for(
            "GangEvicted naming the dead node",
            lambda: _event(testbed, namespace, "dead", "GangEvicted", f"dead-1 on node {dead}, not Ready"),
            timeout=testbed.placement_grace + 30,
        )
        took = time.monotonic() - started
        print(
            f"evicted {took:.1f}s after {dead} went not Ready (grace {testbed.placement_grace}s): {evicted}"
        )
        assert evicted.startswith("gang " + namespace + "/dead: only 1 of 2 members running (1 lost: ")
        wait_for(
            "the survivor deleted", lambda: "dead-0" not in _pods(testbed, namespace, "dead-"), timeout=30
        )
        stuck = get_pod(testbed.http, namespace, "dead-1")
        assert stuck["metadata"].get("deletionTimestamp"), "the member on the dead node was evicted too"

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

        # A pod that only the dead node could take: kube-scheduler asks phalanx, which turns it down.
        probe = gpu_pod("probe", 1, node_selector={"kubernetes.io/hostname": dead})
        create_pod(testbed.http, namespace, probe)
        reason = wait_for(
            "FailedScheduling saying the node is not Ready",
            lambda: _event(testbed, namespace, "probe", "FailedScheduling", "not Ready"),
            timeout=30,
        )
        print(f"probe: {reason}")
        assert not get_pod(testbed.http, namespace, "probe")["spec"].get("nodeName")
        assert double_booked(list_pods(testbed.http)) == []
    finally:
        testbed.set_node_ready(dead, "True")
