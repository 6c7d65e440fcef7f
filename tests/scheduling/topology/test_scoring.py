from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import cache
from itertools import combinations
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.topology import (
    MAX_NODE_SCORE,
    GpuInfo,
    GpuLink,
    NodeTopology,
    TopologyCache,
    TopologyDocument,
    TopologyError,
    best_gpu_set,
    node_topology_score,
    parse_link,
    parse_topo_matrix,
    prepare_topology,
    set_score,
    uniform,
)
from scheduling.topology.graph import set_bandwidth
from scheduling.topology.search import EXACT_SETS, search

from .shared_files import BY_NAME, MATRICES, SharedMatrix, document, read, topology

Key = tuple[int, int, int, int, int, tuple[int, ...]]


class BruteForce:
    """Scores every k-subset with plain max-flow (no bounds, no search); ranks by the documented key."""

    def __init__(self, node: NodeTopology) -> None:
        self.node = node
        self.exact: dict[tuple[int, ...], int] = {}

    def score(self, members: tuple[int, ...]) -> int:
        if members not in self.exact:
            self.exact[members] = set_bandwidth(self.node.graph, members)
        return self.exact[members]

    def key(self, free: frozenset[int], members: tuple[int, ...]) -> Key:
        pair, rest = self.node.pair_mbs, free - set(members)
        inside = list(combinations(members, 2))
        return (
            -self.score(members),
            len({self.node.locality[g] for g in members}),
            sum(pair[a][b] for a in members for b in rest),
            -sum(pair[a][b] for a, b in inside),
            sum(self.node.distance[a][b] for a, b in inside),
            members,
        )

    def best(self, free: frozenset[int], k: int) -> Key:
        return min(self.key(free, members) for members in combinations(sorted(free), k))


def free_sets(count: int) -> Iterator[frozenset[int]]:
    """Every free set of an 8-GPU (or smaller) node; a fixed sample of a 16-GPU one."""
    if count <= 8:
        for mask in range(1, 1 << count):
            yield frozenset(g for g in range(count) if mask >> g & 1)
        return
    yield frozenset(range(count))
    for start in range(0, count, 3):
        yield frozenset((start + step * 5) % count for step in range(10))


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_matches_brute_force(matrix: SharedMatrix) -> None:
    node, brute, cache = topology(matrix.name), BruteForce(topology(matrix.name)), TopologyCache()
    checked = 0
    for free in free_sets(matrix.gpus):
        for k in (1, 2, 4, 8):
            if k > len(free) or (len(free) > 12 and k > 4):
                continue
            choice = best_gpu_set(node, free, k, cache=cache)
            assert choice is not None
            expected = brute.best(free, k)
            assert choice.score == -expected[0], (sorted(free), k)
            assert choice.gpus == expected[-1], (sorted(free), k)
            assert (choice.numa_groups, choice.fragmentation) == expected[1:3]
            assert choice.score <= choice.best_possible
            checked += 1
    assert checked > 0


def test_needs_enough_free_gpus() -> None:
    node = topology("a6000-8")
    assert best_gpu_set(node, frozenset({1, 2, 3}), 4) is None
    assert node_topology_score(node, frozenset({1, 2, 3}), 4) == 0


BAD_REQUESTS = [
    pytest.param(frozenset({0, 1}), 0, "at least one GPU, got k=0", id="k-zero"),
    pytest.param(frozenset({0, 8}), 1, "GPUs [0, 8] are not all on this node (GPU0..GPU7)", id="gpu-beyond"),
    pytest.param(frozenset({-1}), 1, "not all on this node", id="negative-gpu"),
]


@pytest.mark.parametrize(("free", "k", "message"), BAD_REQUESTS)
def test_rejects_bad_requests(free: frozenset[int], k: int, message: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(message)):
        best_gpu_set(topology("a6000-8"), free, k)


def layered(count: int, *, bridges: bool) -> TopologyDocument:
    """A made-up PCIe tree of ``count`` GPUs: pairs on a switch, quads under a bridge, eights on a socket.

    With ``bridges`` every even GPU is NVLink-bridged to the next, which makes pair bandwidths
    non-hierarchical; without, they are hierarchical (ultrametric).
    """

    def kind(a: int, b: int) -> str:
        level = (
            "PIX"
            if a // 2 == b // 2
            else "PXB"
            if a // 4 == b // 4
            else "NODE"
            if a // 8 == b // 8
            else "SYS"
        )
        return f"NV4/{level}" if bridges and a // 2 == b // 2 else level

    links = tuple(parse_link(a, b, kind(a, b)) for a in range(count) for b in range(a + 1, count))
    return TopologyDocument(
        gpus=tuple(GpuInfo(i) for i in range(count)), links=links, gpu_model="NVIDIA RTX A6000"
    )


@cache
def shaped(count: int, shape: str) -> NodeTopology:
    if shape == "nvswitch":
        return prepare_topology(uniform(count, "NV12", gpu_model="NVIDIA A100-SXM4-40GB"))
    return prepare_topology(layered(count, bridges=shape == "bridged"))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_gpu_count_and_request_gets_a_valid_answer(data: st.DataObject) -> None:
    """More than 20 GPUs must not raise an uncaught error (HTTP 500 for prioritize, bind, gang filter)."""
    count = data.draw(st.sampled_from([1, 2, 7, 16, 17, 21, 24, 32, 48, 64]), label="count")
    node = shaped(count, data.draw(st.sampled_from(["nvswitch", "layered", "bridged"]), label="shape"))
    free = frozenset(data.draw(st.sets(st.integers(0, count - 1), min_size=1), label="free"))
    k = data.draw(st.integers(1, len(free)), label="k")
    choice = best_gpu_set(node, free, k)
    assert choice is not None
    assert len(choice.gpus) == k and set(choice.gpus) <= free and list(choice.gpus) == sorted(choice.gpus)
    assert choice.score == set_score(node, choice.gpus) <= choice.best_possible
    assert 0 <= node_topology_score(node, free, k) <= MAX_NODE_SCORE


def test_every_request_on_a_16_gpu_node_is_searched_exactly() -> None:
    assert max(comb(16, k) for k in range(1, 17)) == EXACT_SETS


def _weakest(node: NodeTopology, members: Sequence[int]) -> int:
    return min((node.pair_mbs[a][b] for a, b in combinations(members, 2)), default=0)


def _hierarchical(node: NodeTopology) -> bool:
    pair = node.pair_mbs
    for a, b, c in combinations(range(node.gpu_count), 3):
        low, mid, _ = sorted((pair[a][b], pair[a][c], pair[b][c]))
        if low != mid:
            return False
    return True


BOUNDED_CASES = [
    *(pytest.param(lambda m=m: topology(m.name), id=m.name) for m in MATRICES if m.complete),
    pytest.param(lambda: shaped(12, "layered"), id="layered-12"),
    pytest.param(lambda: shaped(12, "bridged"), id="bridged-12"),
]


@pytest.mark.parametrize("make", BOUNDED_CASES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_the_bounded_search_keeps_its_documented_guarantee(
    make: Callable[[], NodeTopology], data: st.DataObject
) -> None:
    node = make()
    free = tuple(sorted(data.draw(st.sets(st.integers(0, node.gpu_count - 1), min_size=1))))
    k = data.draw(st.integers(1, len(free)))
    gpus, score, _, _ = search(node, free, k, node.set_mbs, exact_sets=0)  # force the bounded search
    assert len(gpus) == k and set(gpus) <= set(free) and score == node.set_mbs(gpus)
    assert _weakest(node, gpus) >= _weakest(node, free[:k])
    if _hierarchical(node):
        assert _weakest(node, gpus) == max(_weakest(node, c) for c in combinations(free, k))


def _nvlinked(doc: TopologyDocument, members: tuple[int, ...]) -> bool:
    """The GPUs of ``members`` form one component over NVLink edges."""
    reached, frontier = {members[0]}, [members[0]]
    while frontier:
        gpu = frontier.pop()
        for other in members:
            link = doc.link(gpu, other)
            if other not in reached and link is not None and link.nvlinks:
                reached.add(other)
                frontier.append(other)
    return len(reached) == len(members)


def _fully_nvlinked(doc: TopologyDocument, members: tuple[int, ...]) -> bool:
    return all((link := doc.link(a, b)) is not None and link.nvlinks > 0 for a, b in combinations(members, 2))


def _relabel(doc: TopologyDocument, new_index: dict[int, int]) -> TopologyDocument:
    old_of = {new: old for old, new in new_index.items()}
    gpus = tuple(
        GpuInfo(
            new, numa_node=doc.gpus[old_of[new]].numa_node, cpu_affinity=doc.gpus[old_of[new]].cpu_affinity
        )
        for new in range(doc.gpu_count)
    )
    links = []
    for lk in doc.links:
        a, b = sorted((new_index[lk.a], new_index[lk.b]))
        links.append(GpuLink(a, b, nvlinks=lk.nvlinks, pcie=lk.pcie))
    return replace(doc, gpus=gpus, links=tuple(sorted(links)))


# The README notes that vendors number the same cube-mesh differently (GPU0's NV2 partners {3,4} in
# one file, {2,7} in another); this relabelling gives the second numbering.
OTHER_NUMBERING = {0: 0, 1: 1, 2: 3, 3: 2, 4: 7, 5: 4, 6: 5, 7: 6}


@pytest.mark.parametrize("numbering", [None, OTHER_NUMBERING], ids=["published", "other-vendor-numbering"])
def test_cube_mesh_quads_are_nvlink_connected(numbering: dict[int, int] | None) -> None:
    doc = document("v100-cubemesh") if numbering is None else _relabel(document("v100-cubemesh"), numbering)
    if numbering is not None:
        assert {b for b in range(8) if (lk := doc.link(0, b)) is not None and lk.nvlinks == 2} == {2, 7}
    node, cache = prepare_topology(doc), TopologyCache()
    for free in free_sets(8):
        if len(free) < 4:
            continue
        choice = best_gpu_set(node, free, 4, cache=cache)
        assert choice is not None
        quads = list(combinations(sorted(free), 4))
        if any(_fully_nvlinked(doc, quad) for quad in quads):
            assert _fully_nvlinked(doc, choice.gpus), sorted(free)
        elif any(_nvlinked(doc, quad) for quad in quads):
            assert _nvlinked(doc, choice.gpus), sorted(free)
    assert best_gpu_set(node, frozenset(range(8)), 4) == best_gpu_set(
        node, frozenset(range(8)), 4, cache=cache
    )


BRIDGED = ["a6000-8", "a30-bridged", "a6000-3"]


@pytest.mark.parametrize("name", BRIDGED)
@pytest.mark.parametrize("pattern", [(2,), (1, 2), (2, 1, 1)], ids=["2s", "1-2", "2-1-1"])
def test_bridged_boxes_hand_out_bridge_pairs(name: str, pattern: tuple[int, ...]) -> None:
    """A request stream from every starting state keeps bridges whole.

    Pairs get an intact bridge while one is free; single GPUs avoid breaking an intact bridge while an
    unpaired GPU is free.
    """
    node, doc, cache = topology(name), document(name), TopologyCache()
    bridges = set(doc.bridged_pairs())
    assert bridges == set(BY_NAME[name].bridged)
    for free_set in free_sets(doc.gpu_count):
        free, step = set(free_set), 0
        while len(free) >= (k := pattern[step % len(pattern)]):
            choice = best_gpu_set(node, frozenset(free), k, cache=cache)
            assert choice is not None
            intact = {pair for pair in bridges if set(pair) <= free}
            loose = free - {g for pair in intact for g in pair}
            if k == 2 and intact:
                assert choice.gpus in intact, (sorted(free_set), sorted(free))
            if k == 1 and loose:
                assert choice.gpus[0] in loose, (sorted(free_set), sorted(free))
            free -= set(choice.gpus)
            step += 1


NVSWITCH_LOWEST = [
    pytest.param("p4d-a100", {1: (0,), 2: (0, 1), 4: (0, 1, 2, 3), 8: tuple(range(8))}, id="p4d"),
    pytest.param(
        "hgx-h100-partial", {1: (0,), 2: (0, 1), 4: (0, 1, 2, 3), 8: tuple(range(8))}, id="hgx-h100"
    ),
    # One GPU goes to the least connected GPU (of unknown locality here), the lowest such index.
    pytest.param("dgx-a100-partial", {1: (6,), 2: (0, 1), 4: (0, 1, 2, 3)}, id="dgx-a100"),
    pytest.param("dgx2-v100-partial", {1: (4,), 2: (0, 1), 4: (0, 1, 2, 3)}, id="dgx2"),
]


@pytest.mark.parametrize(("name", "expected"), NVSWITCH_LOWEST)
def test_nvswitch_ties_break_to_lowest_indices_every_time(
    name: str, expected: dict[int, tuple[int, ...]]
) -> None:
    matrix = BY_NAME[name]
    fresh = prepare_topology(parse_topo_matrix(read(matrix.file), gpu_model=matrix.model))
    everything = list(range(matrix.gpus))
    for k, gpus in expected.items():
        first = best_gpu_set(topology(name), frozenset(everything), k)
        again = best_gpu_set(fresh, frozenset(reversed(everything)), k, cache=TopologyCache())
        assert first == again
        assert first is not None
        assert first.gpus == gpus


def test_nvswitch_prefers_one_socket_then_lowest() -> None:
    node = topology("p4d-a100")
    choice = best_gpu_set(node, frozenset({1, 3, 4, 5, 6}), 2)
    assert choice is not None
    assert choice.gpus == (1, 3)
    choice = best_gpu_set(node, frozenset({3, 4, 5, 6}), 3)
    assert choice is not None
    assert choice.gpus == (4, 5, 6)


NODE_SCORES = [
    pytest.param("a6000-8", frozenset(range(8)), 2, 10, id="a6000-all-free"),
    pytest.param("a6000-8", frozenset({0, 2, 4, 6}), 2, 10 * 24_000 // 72_000, id="a6000-bridges-broken"),
    pytest.param("a6000-8", frozenset({0, 5}), 2, 10 * 10_000 // 72_000, id="a6000-across-sockets"),
    pytest.param("p4d-a100", frozenset({0, 4}), 2, 10 * 250_000 // 264_000, id="p4d-across-sockets"),
    pytest.param("v100-cubemesh", frozenset({0, 1, 4, 5}), 4, 10 * 64_000 // 92_000, id="cube-mixed-quad"),
    pytest.param("v100-cubemesh", frozenset({4, 5, 6, 7}), 4, 10, id="cube-socket-quad"),
    pytest.param("rtx4090-all-sys", frozenset({0, 5}), 2, 10, id="all-sys-any-pair"),
    pytest.param("l40s-8", frozenset({3}), 1, 10, id="one-gpu"),
    pytest.param("l40s-8", frozenset({3}), 2, 0, id="does-not-fit"),
]


@pytest.mark.parametrize(("name", "free", "k", "expected"), NODE_SCORES)
def test_node_topology_score(name: str, free: frozenset[int], k: int, expected: int) -> None:
    assert node_topology_score(topology(name), free, k) == expected
    assert node_topology_score(topology(name), free, k, cache=TopologyCache()) == expected


def test_set_score() -> None:
    assert set_score(topology("v100-cubemesh"), [3, 0, 2, 1]) == 92_000
    assert set_score(topology("v100-cubemesh"), {5}) == 0
    with pytest.raises(TopologyError, match="not all on this node"):
        set_score(topology("g6e-l40s"), [4])


def test_cache_is_bounded_and_reused() -> None:
    cache = TopologyCache(max_topologies=1, max_choices=2, max_set_scores=4)
    node = cache.topology(document("a6000-8"))
    assert cache.topology(document("a6000-8")) is node
    first = best_gpu_set(node, frozenset(range(8)), 2, cache=cache)
    assert best_gpu_set(node, frozenset(range(8)), 2, cache=cache) is first
    for k in (1, 2, 4):
        best_gpu_set(node, frozenset(range(8)), k, cache=cache)
    assert len(cache.choices) == 2
    assert len(cache.set_scores) <= 4
    cache.topology(document("a30-bridged"))
    assert len(cache.topologies) == 1
    cache.clear()
    assert len(cache.choices) == len(cache.set_scores) == len(cache.topologies) == 0


@pytest.mark.parametrize("k", [2, 4])
def test_the_exact_walk_stopped_by_its_evaluation_budget_still_answers(k: int) -> None:
    node, free = topology("v100-cubemesh"), tuple(range(8))
    exact = search(node, free, k, node.set_mbs)
    gpus, score, _, _ = search(node, free, k, node.set_mbs, max_evaluations=1)
    assert len(gpus) == k and score == node.set_mbs(gpus) <= exact[1]
