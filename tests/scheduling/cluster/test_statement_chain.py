"""A statement carried from an earlier one plans exactly as a fresh statement on the same snapshot.

``StatementChain.open`` starts each statement from the last one's memos (the gang planner's node orders
and domain sums, the pass's node facts), which then look again only at the nodes that differ. A random
sequence of cluster changes (pods bound and finished, nodes resized, relabelled, cordoned, removed and
listed again, promises made) with plans on every statement must leave every plan, every node order and
every domain sum equal to those of a statement opened fresh on the same snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.state import ClusterState
from scheduling.cluster.statement import CARRY_LIMIT, Statement, StatementChain
from scheduling.gang.domain_room import domain_room
from scheduling.gang.fresh_order import fresh_order
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS, plan_gang
from scheduling.model import Pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod

NODES = 6
RACK = DEFAULT_LOCALITY_KEYS[0]

CLUSTER_CHANGE = st.tuples(
    st.sampled_from(
        ["bind", "bind", "bind", "finish", "finish", "resize", "rack", "cordon", "remove", "relist"]
    ),
    st.integers(0, NODES - 1),
    st.integers(1, 8),
)

GANG = st.lists(st.sampled_from([1, 1, 2, 4, 8]), min_size=1, max_size=3)  # each member's GPUs


@dataclass
class Bed:
    """The cluster state the sequence changes, with the pods bound so far by name."""

    state: ClusterState
    bound: dict[str, Pod]
    made: int = 0

    def change(self, what: str, i: int, size: int) -> None:
        name = f"n{i}"
        node = a_node(name).gpus(8).labels(**{RACK: f"r{i % 3}"})
        if what == "bind":
            room = Statement(self.state.snapshot()).room(name)
            if room is not None and len(room.free) >= size:
                self.made += 1
                pod = a_pod(f"b{self.made}").gpus(size).on(name, sorted(room.free)[:size]).build()
                self.state.put_pod(pod)
                self.bound[pod.name] = pod
        elif what == "finish" and self.bound:
            pod = self.bound.pop(sorted(self.bound)[size % len(self.bound)])
            self.state.remove_pod(pod.uid)
        elif what == "resize":
            self.state.put_node(a_node(name).gpus(max(size, 4)).labels(**{RACK: f"r{i % 3}"}).build())
        elif what == "rack":
            self.state.put_node(node.labels(**{RACK: f"r{size % 3}"}).build())
        elif what == "cordon":
            self.state.put_node(node.cordoned().build())
        elif what == "remove":
            self.state.remove_node(name)
        elif what == "relist":
            self.state.replace_nodes(
                [a_node(f"n{k}").gpus(8).labels(**{RACK: f"r{k % 3}"}).build() for k in range(NODES)]
            )


def _promises(snapshot_nodes: list[str], picks: list[int]) -> PromiseBook:
    """Promises of one GPU (the highest index) on the picked nodes."""
    promises = {}
    for n, i in enumerate(picks):
        node = snapshot_nodes[i % len(snapshot_nodes)] if snapshot_nodes else "n0"
        pod = a_pod(f"p{n}").gpus(1).build()
        promises[pod.uid] = Promise(pod.uid, pod.key, node, (7,), 1e9, pod.requests)
    return PromiseBook.of(promises)


def _plans(work: Statement, gangs: list[list[int]], step: int, cache: TopologyCache) -> list[object]:
    """Each gang planned on ``work`` in turn (those that fit stay on it), and what each came to."""
    names = sorted(work.snapshot.nodes)
    results: list[object] = []
    for g, sizes in enumerate(gangs):
        members = [a_pod(f"s{step}-g{g}-{m}").gpus(size).build() for m, size in enumerate(sizes)]
        results.append(
            plan_gang(f"ml/g{g}", members, names, work.snapshot, work.promises, cache, statement=work)
        )
    return results


def _orders(work: Statement) -> list[object]:
    """Every kept node order and domain sum, brought up to date on ``work``."""
    names = frozenset(work.snapshot.nodes)
    seen: list[object] = []
    for size in (1, 2, 4, 8):
        for domain in (None, (RACK, "r0"), (RACK, "r1")):
            order = fresh_order(work, a_pod("probe").gpus(size).build(), names, domain)
            seen.append([entry[:3] for entry in order.order])
    sums = domain_room(work, names, DEFAULT_LOCALITY_KEYS)
    seen.append(sorted(sums.by_node.items()))
    seen.append([sorted(free.items()) for free in sums.free])
    return seen


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.lists(CLUSTER_CHANGE, max_size=4),
            st.lists(GANG, max_size=3),
            st.lists(st.integers(0, NODES - 1), max_size=2),  # nodes holding a promise this step
            st.booleans(),  # look at the orders on this step (else they are left to fall behind)
        ),
        min_size=1,
        max_size=12,
    )
)
def test_a_carried_statement_plans_as_a_fresh_one(
    steps: list[tuple[list[tuple[str, int, int]], list[list[int]], list[int], bool]],
) -> None:
    bed = Bed(ClusterState(), {})
    bed.state.replace_nodes(
        [a_node(f"n{k}").gpus(8).labels(**{RACK: f"r{k % 3}"}).build() for k in range(NODES)]
    )
    chain, cache = StatementChain(), TopologyCache()
    for step, (changes, gangs, picks, look) in enumerate(steps):
        for what, i, size in changes:
            bed.change(what, i, size)
        snapshot = bed.state.snapshot()
        promises = _promises(sorted(snapshot.nodes), picks)
        carried, fresh = chain.open(snapshot, promises), Statement(snapshot, promises)
        assert _plans(carried, gangs, step, cache) == _plans(fresh, gangs, step, cache)
        if look:
            assert _orders(carried) == _orders(fresh)


def test_a_carried_statement_looks_again_only_at_the_nodes_that_changed() -> None:
    state = ClusterState()
    state.replace_nodes([a_node(f"n{k:03d}").gpus(8).build() for k in range(200)])
    chain, cache = StatementChain(), TopologyCache()
    first = chain.open(state.snapshot())
    _plans(first, [[1]], 0, cache)
    state.put_pod(a_pod("x").gpus(2).on("n150", [0, 1]).build())
    second = chain.open(state.snapshot())
    assert second.changed_since(0) == ["n000", "n150"]  # the first plan's node, and the bound pod's
    assert _plans(second, [[1]], 1, cache) == _plans(Statement(second.snapshot), [[1]], 1, cache)


def test_nothing_is_carried_past_a_relist_or_too_many_changes() -> None:
    state = ClusterState()
    nodes = [a_node(f"n{k:04d}").gpus(8).build() for k in range(CARRY_LIMIT + 10)]
    state.replace_nodes(nodes)
    chain, cache = StatementChain(), TopologyCache()
    _plans(chain.open(state.snapshot()), [[1]], 0, cache)
    state.replace_nodes(nodes)
    assert chain.open(state.snapshot()).memo == {}
    _plans(chain.open(state.snapshot()), [[1]], 1, cache)
    for k in range(CARRY_LIMIT + 1):
        state.put_pod(a_pod(f"x{k}").gpus(1).on(nodes[k].name, [0]).build())
    assert chain.open(state.snapshot()).memo == {}
