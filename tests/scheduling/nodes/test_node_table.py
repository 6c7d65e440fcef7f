"""Per-node GPU rows: holders by index, free counts as the metrics count them, islands of the free GPUs."""

from __future__ import annotations

from dataclasses import replace

from scheduling.gpu.fragmentation import gpu_fragmentation
from scheduling.model import Node
from scheduling.nodes.node_table import node_rows
from scheduling.topology import TopologyCache, uniform
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.topology.shared_files import document

CACHE = TopologyCache()


def bridged(name: str, *, cordoned: bool = False, ready: bool = True) -> Node:
    node = a_node(name).build()
    return replace(node, topology=CACHE.topology(document("a6000-8")), unschedulable=cordoned, ready=ready)


def test_holders_free_indices_and_islands() -> None:
    pods = [
        a_pod("train-0").gpus(2).on("n1", [0, 1]).build(),
        a_pod("solo").gpus(1).on("n1", [2]).build(),
        a_pod("other-scheduler").gpus(1).on("n1").build(),
    ]
    [row] = node_rows(snapshot_of([bridged("n1")], pods))
    assert dict(row.holders) == {0: ("ml/train-0",), 1: ("ml/train-0",), 2: ("ml/solo",)}
    assert row.unindexed == 1, "a pod without an index annotation holds a GPU phalanx cannot name"
    assert (row.total, row.allocated, row.free) == (8, 4, 4)
    assert row.free_indices == (3, 4, 5, 6, 7)
    assert row.islands == ((4, 5), (6, 7), (3,)), "GPU 3 lost its bridge partner"


def test_counts_agree_with_the_placement_managers_metrics() -> None:
    nodes = [
        bridged("n1"),
        bridged("n2", cordoned=True),
        bridged("n3", ready=False),
        a_node("cpu").gpus(0).build(),
    ]
    pods = [a_pod(f"p{i}").gpus(2).on(f"n{i}", [0, 1]).build() for i in (1, 2, 3)]
    snapshot = snapshot_of(nodes, pods)
    rows = {r.name: r for r in node_rows(snapshot)}
    for figures in gpu_fragmentation(snapshot).nodes:
        row = rows[figures.node]
        assert (row.total, row.allocated, row.free) == (figures.total, figures.allocated, figures.free)
    assert rows["n2"].free == 0 and rows["n2"].cordoned, "nothing new goes to a cordoned node"
    assert rows["n3"].free == 0 and not rows["n3"].ready
    assert rows["n2"].free_indices == (2, 3, 4, 5, 6, 7), "what would be free is still listed"
    assert (rows["cpu"].total, rows["cpu"].free, rows["cpu"].islands) == (0, 0, None)
    assert list(rows) == ["cpu", "n1", "n2", "n3"]


def test_without_a_topology_islands_are_unknown_and_a_bad_annotation_is_named() -> None:
    plain = a_node("plain").build()
    broken = replace(
        a_node("broken").build(), topology_problem="annotation phalanx.io/gpu-topology is unreadable"
    )
    pcie = replace(a_node("pcie").build(), topology=CACHE.topology(uniform(8, "PIX")))
    rows = {r.name: r for r in node_rows(snapshot_of([plain, broken, pcie]))}
    assert rows["plain"].islands is None
    assert rows["broken"].free == 0 and rows["broken"].topology_problem is not None
    assert rows["pcie"].islands == tuple((g,) for g in range(8)), "PCIe only: every free GPU alone"
