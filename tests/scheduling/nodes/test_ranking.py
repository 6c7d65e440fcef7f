from __future__ import annotations

from dataclasses import replace

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.usage import FreeGpus
from scheduling.gpu.choice import choose_gpus
from scheduling.gpu.fit import filter_nodes
from scheduling.nodes.ranking import ScoreMemo, rank_nodes
from scheduling.reasons import Reason
from scheduling.topology import TopologyCache, parse_topo_matrix
from tests.builders import a_node, a_pod, snapshot_of
from tests.conftest import SHARED

A6000 = parse_topo_matrix(
    (SHARED / "topologies" / "rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt").read_text()
)


def test_a_node_with_a_free_bridge_pair_outranks_one_without() -> None:
    cache = TopologyCache()
    topology = cache.topology(A6000)
    paired = replace(a_node("paired").build(), topology=topology)
    split = replace(a_node("split").build(), topology=topology)
    running = [
        a_pod("x").gpus(6).on("paired", [0, 1, 2, 3, 4, 5]).build(),  # leaves the bridged pair 6-7
        a_pod("y").gpus(6).on("split", [0, 2, 3, 4, 5, 7]).build(),  # leaves 1 and 6: no bridge
    ]
    scores = dict(
        rank_nodes(
            a_pod("p").gpus(2).build(),
            ["split", "paired"],
            snapshot_of([paired, split], running),
            PromiseBook(),
            cache,
        )
    )
    assert scores["paired"] > scores["split"]
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores.values())


def test_one_gpu_pods_rank_by_packing_alone() -> None:
    cache = TopologyCache()
    busy = replace(a_node("busy").build(), topology=cache.topology(A6000))
    idle = replace(a_node("idle").build(), topology=cache.topology(A6000))
    running = [a_pod("x").gpus(4).on("busy", range(4)).build()]
    scores = dict(
        rank_nodes(
            a_pod("p").gpus(1).build(),
            ["idle", "busy"],
            snapshot_of([busy, idle], running),
            PromiseBook(),
            cache,
        )
    )
    assert scores["busy"] > scores["idle"]


def test_bind_choice_takes_the_bridge_pair_not_the_lowest_indices() -> None:
    cache = TopologyCache()
    node = replace(a_node("n").build(), topology=cache.topology(A6000))
    free = FreeGpus(frozenset({1, 2, 3, 4, 5, 6, 7}), 7)
    assert choose_gpus(node, free, 2, cache) in {(2, 3), (4, 5), (6, 7)}
    assert choose_gpus(a_node("plain").build(), free, 2, cache) == (1, 2)


def test_a_node_whose_topology_is_unreadable_is_turned_down_for_gpu_pods_only() -> None:
    broken = replace(a_node("n").build(), topology_problem="annotation is unreadable")
    snap = snapshot_of([broken])
    gpu = filter_nodes(a_pod("g").gpus(1).build(), ["n"], snap, PromiseBook())
    cpu = filter_nodes(a_pod("c").build(), ["n"], snap, PromiseBook())
    assert gpu.rejected["n"].reason is Reason.UNREADABLE_TOPOLOGY
    assert cpu.feasible == ("n",)


def test_a_topology_listing_fewer_gpus_than_allocatable_caps_the_node() -> None:
    cache = TopologyCache()
    three = parse_topo_matrix(
        (SHARED / "topologies" / "rtx-a6000-3gpu-one-bridge-pair_siboehm-bench.txt").read_text()
    )
    node = replace(a_node("n").gpus(8).build(), topology=cache.topology(three))
    decision = filter_nodes(a_pod("p").gpus(4).build(), ["n"], snapshot_of([node]), PromiseBook())
    assert decision.rejected["n"].reason is Reason.TOO_FEW_GPUS
    assert "only 3 GPUs" in decision.rejected["n"].message


def test_the_score_memo_never_changes_an_answer_and_notices_changed_nodes() -> None:
    cache = TopologyCache()
    nodes = [replace(a_node(f"n{i}").build(), topology=cache.topology(A6000)) for i in range(4)]
    running = [a_pod(f"x{i}").gpus(i).on(f"n{i}", range(i)).build() for i in range(4)]
    snap = snapshot_of(nodes, running)
    memo = ScoreMemo()
    pod = a_pod("p").gpus(2).build()
    plain = rank_nodes(pod, [n.name for n in nodes], snap, PromiseBook(), cache)
    assert rank_nodes(pod, [n.name for n in nodes], snap, PromiseBook(), cache, memo) == plain
    assert rank_nodes(pod, [n.name for n in nodes], snap, PromiseBook(), cache, memo) == plain
    fuller = snapshot_of(nodes, [*running, a_pod("y").gpus(4).on("n0", [4, 5, 6, 7]).build()])
    assert dict(rank_nodes(pod, ["n0"], fuller, PromiseBook(), cache, memo)) == dict(
        rank_nodes(pod, ["n0"], fuller, PromiseBook(), cache)
    )


def test_the_score_memo_stays_bounded_over_every_gpu_count_and_node_churn() -> None:
    """One table per distinct GPU count and one entry per node ever seen must not grow without end."""
    cache, memo = TopologyCache(), ScoreMemo()
    for need in range(1, 400):
        nodes = [a_node(f"n{need}-{i}").build() for i in range(3)]  # a new set of nodes every time
        names = [n.name for n in nodes]
        rank_nodes(a_pod("p").gpus(need).build(), names, snapshot_of(nodes), PromiseBook(), cache, memo)
        rank_nodes(a_pod("q").gpus(2).build(), names, snapshot_of(nodes), PromiseBook(), cache, memo)
    assert len(memo) <= 64
    assert max(memo.sizes().values()) <= 3 * 3 + 16
