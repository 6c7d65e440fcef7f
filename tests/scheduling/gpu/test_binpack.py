from __future__ import annotations

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gpu.binpack import MAX_SCORE, packing_score
from scheduling.model import Pod
from tests.builders import a_node, a_pod, snapshot_of


def scores(pod: Pod, names: list[str], snapshot: ClusterSnapshot) -> dict[str, int]:
    result = {}
    for name in names:
        node, free = snapshot.nodes.get(name), snapshot.free_on(name, PromiseBook())
        result[name] = 0 if node is None or free is None else packing_score(node, free, pod.requests.gpus)
    return result


def test_fuller_nodes_score_higher_and_scores_are_integers_in_range() -> None:
    nodes = [a_node(f"n{i}").build() for i in range(5)]
    running = [a_pod(f"x{i}").gpus(i).on(f"n{i}", range(i)).build() for i in range(1, 5)]
    got = scores(a_pod("p").gpus(4).build(), [n.name for n in nodes], snapshot_of(nodes, running))
    assert all(isinstance(s, int) and 0 <= s <= MAX_SCORE for s in got.values())
    assert got == {"n0": 5, "n1": 6, "n2": 7, "n3": 8, "n4": 10}


def test_nodes_that_cannot_fit_score_zero() -> None:
    nodes = [a_node("full").build(), a_node("free").build()]
    running = [a_pod("x").gpus(6).on("full", range(6)).build()]
    got = scores(a_pod("p").gpus(4).build(), ["full", "free", "ghost"], snapshot_of(nodes, running))
    assert got == {"full": 0, "free": 5, "ghost": 0}


def test_cpu_only_pods_prefer_nodes_without_gpus() -> None:
    nodes = [a_node("gpu").build(), a_node("cpu").gpus(0).build()]
    got = scores(a_pod("p").build(), ["gpu", "cpu"], snapshot_of(nodes))
    assert got["cpu"] == MAX_SCORE
    assert got["gpu"] < got["cpu"]
