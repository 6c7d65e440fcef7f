"""The index's choice is the full path's: decisive_node over the full filter's feasible list."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.change_log import ChangeLog
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import ClusterState
from scheduling.gpu.fit import filter_nodes
from scheduling.model import Pod, Resources
from scheduling.nodes.decisive import decisive_node
from scheduling.nodes.rank_index import NotIndexed, RankIndex
from scheduling.nodes.ranking import ScoreMemo
from scheduling.nodes.readiness import split_candidates
from tests.builders import a_node, a_pod
from tests.scheduling.nodes.test_decisive import CACHE, GIB, TOPOLOGIES


def full_path(pod: Pod, candidates: list[str], snap: ClusterSnapshot, book: PromiseBook) -> str | None:
    healthy, _ = split_candidates(candidates, snap.nodes)
    feasible = filter_nodes(pod, healthy, snap, book).feasible
    if len(feasible) == 1:
        return feasible[0]
    return decisive_node(pod, feasible, snap, book, CACHE, ScoreMemo())


def a_node_like(rng: random.Random, i: int) -> object:
    node = a_node(f"n{i:02d}").gpus(rng.choice([4, 8, 8])).cpu(64_000).memory(512 * GIB).build()
    if rng.random() < 0.7:
        node = replace(node, topology=rng.choice(TOPOLOGIES))
    if rng.random() < 0.1:
        node = replace(node, ready=False)
    if rng.random() < 0.05:
        node = replace(node, unschedulable=True)
    return node


def step(rng: random.Random, state: ClusterState, live: dict[str, Pod], n: int) -> None:
    """One change as the cache applies them: a pod bound or gone, or a node changed or gone."""
    roll = rng.random()
    if roll < 0.55:
        node = f"n{rng.randrange(12):02d}"
        taken = set()
        for pod in live.values():
            if pod.node_name == node and pod.gpu_indices:
                taken |= set(pod.gpu_indices)
        free = sorted(set(range(8)) - taken)
        gpus = free[: rng.choice([0, 1, 2])]
        pod = a_pod(f"x{n}").gpus(len(gpus)).cpu(rng.choice([500, 4000])).memory(GIB).on(node, gpus).build()
        live[pod.uid] = pod
        state.put_pod(pod)
    elif roll < 0.8 and live:
        uid = rng.choice(sorted(live))
        del live[uid]
        state.remove_pod(uid)
    elif roll < 0.95:
        state.put_node(a_node_like(rng, rng.randrange(12)))  # type: ignore[arg-type]
    else:
        state.remove_node(f"n{rng.randrange(12):02d}")


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32))
def test_the_index_chooses_what_the_full_path_chooses_as_the_cluster_changes(seed: int) -> None:
    rng = random.Random(seed)
    state = ClusterState()
    state.replace_nodes([a_node_like(rng, i) for i in range(10)])  # type: ignore[misc]
    live: dict[str, Pod] = {}
    index = RankIndex(max_shapes=3)
    shapes = [a_pod("p").gpus(g).cpu(c).memory(GIB).build() for g, c in ((1, 1000), (2, 4000), (4, 1000))]
    for n in range(60):
        step(rng, state, live, n)
        snap = state.snapshot()
        pod = rng.choice(shapes)
        names = [*sorted(snap.nodes), "gone"]
        candidates = rng.sample(names, rng.randint(1, len(names)))
        book = PromiseBook()
        if rng.random() < 0.3:
            node = rng.choice(sorted(snap.nodes))
            book = book.add(Promise("u", "ml/y", node, (0,), 1e9, Resources(milli_cpu=8000, gpus=1)))
        chosen = index.choose(pod, set(candidates), snap, book, CACHE, ScoreMemo())
        assert chosen == full_path(pod, candidates, snap, book), (n, pod.requests, candidates)


def test_an_older_snapshot_or_one_without_a_log_is_not_indexed() -> None:
    state = ClusterState()
    state.replace_nodes([a_node("a").gpus(8).build(), a_node("b").gpus(8).build()])
    old = state.snapshot()
    state.put_pod(a_pod("x").gpus(1).on("a", [0]).build())
    index, pod = RankIndex(), a_pod("p").gpus(1).build()
    assert index.choose(pod, {"a", "b"}, state.snapshot(), PromiseBook(), CACHE) == "a"
    for snapshot in (old, replace(state.snapshot(), changes=None)):
        try:
            index.choose(pod, {"a", "b"}, snapshot, PromiseBook(), CACHE)
        except NotIndexed:
            continue
        msg = "answered from an index newer than the snapshot"
        raise AssertionError(msg)


def test_the_log_says_when_it_no_longer_covers_a_span() -> None:
    log = ChangeLog(keep=2)
    for version, name in enumerate("abcdef", start=1):
        log.note(version, name)
    assert log.since(4, 6) == frozenset("ef")
    assert log.since(1, 6) is None
    log.everything(7)
    assert log.since(6, 7) is None
    assert log.since(7, 7) == frozenset()
