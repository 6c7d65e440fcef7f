from __future__ import annotations

from scheduling.gpu.fragmentation import NodeGpus, gpu_fragmentation
from tests.builders import a_node, a_pod, snapshot_of


def test_free_gpus_spread_over_nodes_are_counted_as_partial_nodes() -> None:
    nodes = [a_node(f"n{i}").gpus(8).build() for i in range(3)]
    pods = [
        a_pod("a").gpus(6).on("n0", range(6)).phase("Running").build(),
        a_pod("b").gpus(2).on("n1", [0, 1]).phase("Running").build(),
    ]
    figures = gpu_fragmentation(snapshot_of(nodes, pods))
    assert figures.nodes == (NodeGpus("n0", 8, 6, 2), NodeGpus("n1", 8, 2, 6), NodeGpus("n2", 8, 0, 8))
    assert figures.partial_nodes == 2
    assert figures.largest_free_block == 8


def test_unusable_nodes_offer_no_free_gpus_and_cpu_nodes_are_left_out() -> None:
    nodes = [a_node("down").gpus(8).not_ready().build(), a_node("cordoned").gpus(4).cordoned().build()]
    cpu_only = a_node("cpu").gpus(0).build()
    pod = a_pod("a").gpus(1).on("down", [0]).phase("Running").build()
    figures = gpu_fragmentation(snapshot_of([*nodes, cpu_only], [pod]))
    assert figures.nodes == (NodeGpus("cordoned", 4, 0, 0), NodeGpus("down", 8, 1, 0))
    assert (figures.partial_nodes, figures.largest_free_block) == (0, 0)


def test_a_pod_without_gpu_indices_still_takes_gpus() -> None:
    pod = a_pod("foreign").gpus(3).on("n0").phase("Running").build()
    [node] = gpu_fragmentation(snapshot_of([a_node("n0").gpus(8).build()], [pod])).nodes
    assert (node.allocated, node.free) == (3, 5)


def test_an_empty_cluster_has_nothing_free() -> None:
    figures = gpu_fragmentation(snapshot_of([]))
    assert (figures.nodes, figures.partial_nodes, figures.largest_free_block) == ((), 0, 0)
