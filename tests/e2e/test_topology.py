"""GPU topology end to end: bridged pairs for 2-GPU pods, and an unreadable topology explained."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    get_pod,
    gpu_pod,
    gpus_of,
    kept_gated,
    list_pods,
    live,
    member,
    podgroup,
    wait_for,
    wait_pod,
)

from kubeio.errors import NotFoundError
from testbed.nodes import SimNodeSpec, topology_from_file
from tests.e2e.conftest import BRIDGED_A6000, why_json

pytestmark = pytest.mark.both_modes
"""Run with phalanx as the extender and as the framework sidecar (``tests/e2e/conftest.py``)."""

BRIDGE_PAIRS = {(0, 1), (2, 3), (4, 5), (6, 7)}  # NV4 pairs of the A6000 box the session nodes use


def free_bridge_pairs(testbed: Testbed, node: str) -> set[tuple[int, int]]:
    held = {
        g for p in list_pods(testbed.http) if live(p) and p["spec"]["nodeName"] == node for g in gpus_of(p)
    }
    return {pair for pair in BRIDGE_PAIRS if not set(pair) & held}


def test_two_gpu_pods_get_bridged_pairs_while_any_is_free(testbed: Testbed, namespace: str) -> None:
    sizes = [1, 2, 2, 2, 1, 2, 2, 1, 2, 2, 2, 2, 1]  # a lone GPU first: lowest-index choice would split pairs
    checked = 0
    for i, size in enumerate(sizes):
        before = {n: free_bridge_pairs(testbed, n) for n in ("gpu-node-1", "gpu-node-2", "gpu-node-3")}
        create_pod(testbed.http, namespace, gpu_pod(f"p{i}", size))
        pod = wait_pod(testbed.http, namespace, f"p{i}", "bound", live)
        node, gpus = pod["spec"]["nodeName"], gpus_of(pod)
        if size == 2 and before[node]:
            assert gpus in BRIDGE_PAIRS, f"p{i} on {node} got {gpus} while {sorted(before[node])} were free"
            checked += 1
    assert checked >= 8


@pytest.fixture
def broken_node(testbed: Testbed) -> Iterator[str]:
    """A GPU node whose topology annotation is corrupt, removed afterwards."""
    name = "gpu-node-broken"
    spec = SimNodeSpec(
        name, gpus=8, labels={"phalanx.io/rack": "rack-broken"}, topology='{"v": 1, "gpus": "oops"}'
    )
    testbed.add_nodes([spec])
    yield name
    with contextlib.suppress(NotFoundError):
        testbed.http.request("DELETE", f"/api/v1/nodes/{name}")


def test_a_node_with_an_unreadable_topology_is_named_by_phalanx_why(
    testbed: Testbed,
    namespace: str,
    broken_node: str,
) -> None:
    """A pod only the broken node could take stays gated; ``phalanx why`` names the unreadable annotation.

    The release pass counts no room on a node whose GPUs it cannot read, so it keeps the pod gated with
    its general sentence; the reason itself is the extender's filter's, which ``phalanx why`` asks offline.
    """
    pod = gpu_pod("pinned", 1, node_selector={"phalanx.io/rack": "rack-broken"})
    create_pod(testbed.http, namespace, pod)
    print(kept_gated(testbed.http, namespace, "pinned"))
    answer = why_json(testbed, f"{namespace}/pinned")
    print(answer["nodes"])
    [broken] = [group for group in answer["nodes"] if group["nodes"] == [broken_node]]
    assert "GPU topology annotation phalanx.io/gpu-topology is unreadable" in broken["message"]
    assert not get_pod(testbed.http, namespace, "pinned")["spec"].get("nodeName")


@pytest.fixture
def rack_a(testbed: Testbed) -> Iterator[list[str]]:
    """Two more bridged 8-GPU nodes that share rack-a (the session's three nodes are one per rack)."""
    names = ["gpu-rack-a-1", "gpu-rack-a-2"]
    topology = topology_from_file(BRIDGED_A6000)
    testbed.add_nodes(
        [SimNodeSpec(n, gpus=8, labels={"phalanx.io/rack": "rack-a"}, topology=topology) for n in names]
    )
    yield names
    for name in names:
        with contextlib.suppress(NotFoundError):
            testbed.http.request("DELETE", f"/api/v1/nodes/{name}")


def test_an_8_gpu_gang_lands_on_the_fewest_nodes_of_one_rack(
    testbed: Testbed, namespace: str, rack_a: list[str]
) -> None:
    create_podgroup(testbed.http, namespace, podgroup("wide", 2))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"wide-{i}", "wide", 8))
    wait_for(
        "both members bound",
        lambda: (
            all(live(p) for p in list_pods(testbed.http, namespace))
            and len(list_pods(testbed.http, namespace)) == 2
        ),
        timeout=60,
    )
    nodes = sorted(p["spec"]["nodeName"] for p in list_pods(testbed.http, namespace))
    assert nodes == rack_a, f"the only rack that holds 16 GPUs is rack-a, got {nodes}"
