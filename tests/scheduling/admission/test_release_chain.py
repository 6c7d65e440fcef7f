"""A release pass that starts from the last pass's statement decides exactly as one that starts afresh.

The placement manager keeps its passes' and its door's statements in one ``StatementChain``, so each
pass looks again only at the nodes that changed (node orders, domain sums, the nodes a pod's selector
allows, the capacity). A random sequence of cluster changes between passes (pods created gated,
released pods bound, running pods finished, nodes relabelled, cordoned, resized, removed) must leave
every decision equal to that of a pass with no chain, on the same snapshot.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.release import GateSettings, KeptRule, release
from scheduling.admission.verdict import ALLOWED_KEPT
from scheduling.admission.walk import NodeFacts
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.state import ClusterState
from scheduling.cluster.statement import Statement, StatementChain
from scheduling.model import Node
from scheduling.queues.view import view_of
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod
from tests.scheduling.admission.test_release import NOW, T0
from tests.scheduling.queues.builders import gpu_queue

NODES = 5
SETTINGS = GateSettings(starve_after=3600.0, max_unbound_pods=4)

CHANGE = st.tuples(
    st.sampled_from(["create", "create", "create", "bind", "finish", "pool", "cordon", "resize", "remove"]),
    st.integers(0, NODES - 1),  # which node, or which pod
    st.sampled_from([1, 1, 2, 4, 8]),  # GPUs
    st.sampled_from([None, "a", "b"]),  # the pool a created pod selects, or a node is put in
)


def _node(i: int, pool: str | None, gpus: int = 8) -> Node:
    return a_node(f"n{i}").gpus(gpus).labels(pool=pool or "a").build()


class Bed:
    """The cluster the sequence changes: its state, and a counter for pod names."""

    def __init__(self) -> None:
        self.state = ClusterState()
        self.state.replace_nodes([_node(i, "ab"[i % 2]) for i in range(NODES)])
        self.state.replace_queues([gpu_queue("q1", quota=16), gpu_queue("q2", quota=16)])
        self.made = 0

    def change(self, what: str, i: int, gpus: int, pool: str | None) -> None:
        snapshot = self.state.snapshot()
        pods = sorted(snapshot.all_pods(), key=lambda p: p.name)
        if what == "create":
            self.made += 1
            pod = a_pod(f"p{self.made:03d}").gpus(gpus).queue(f"q{1 + i % 2}").created(T0).gated().build()
            self.state.put_pod(replace(pod, node_selector={"pool": pool}) if pool else pod)
        elif what == "bind":
            ungated = [p for p in pods if not p.gated and p.node_name is None]
            if ungated:
                pod = ungated[i % len(ungated)]
                room = Statement(snapshot).room(f"n{i}")
                if room is not None and len(room.free) >= pod.requests.gpus:
                    gpus_on = tuple(sorted(room.free)[: pod.requests.gpus])
                    self.state.put_pod(replace(pod, node_name=f"n{i}", gpu_indices=gpus_on))
        elif what == "finish":
            bound = [p for p in pods if p.node_name is not None]
            if bound:
                self.state.remove_pod(bound[i % len(bound)].uid)
        elif what == "pool":
            self.state.put_node(_node(i, pool))
        elif what == "cordon":
            self.state.put_node(a_node(f"n{i}").labels(pool=pool or "a").cordoned().build())
        elif what == "resize":
            self.state.put_node(_node(i, pool, gpus=max(gpus, 2)))
        else:
            self.state.remove_node(f"n{i}")

    def ungate(self, keys: list[str]) -> None:
        """The released pods, ungated as the placement manager's patch does."""
        snapshot = self.state.snapshot()
        for key in keys:
            namespace, name = key.split("/")
            pod = snapshot.pod(namespace, name)
            if pod is not None:
                self.state.put_pod(replace(pod, gates=()))


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.lists(CHANGE, max_size=5), min_size=1, max_size=10))
def test_a_chained_pass_decides_as_a_fresh_one(steps: list[list[tuple[str, int, int, str | None]]]) -> None:
    bed, chain, cache = Bed(), StatementChain(), TopologyCache()
    book = ReleasedBook()
    for changes in steps:
        for change in changes:
            bed.change(*change)
        snapshot = bed.state.snapshot()
        view = view_of(snapshot, PromiseBook())
        chained = release(snapshot, PromiseBook(), view, book, cache, now=NOW, settings=SETTINGS, chain=chain)
        fresh = release(snapshot, PromiseBook(), view, book, cache, now=NOW, settings=SETTINGS)
        assert chained == fresh
        book = chained.in_flight
        bed.ungate([key for r in chained.released for key in r.pods])


def test_the_allowed_nodes_kept_across_passes_stay_bounded() -> None:
    bed, chain, cache = Bed(), StatementChain(), TopologyCache()
    for i in range(ALLOWED_KEPT + 20):  # each pod selects its own pool, which no node is in
        pod = replace(
            a_pod(f"s{i}").gpus(1).queue("q1").created(T0).gated().build(), node_selector={"pool": f"p{i}"}
        )
        bed.state.put_pod(pod)
        snapshot = bed.state.snapshot()
        view = view_of(snapshot, PromiseBook())
        decision = release(
            snapshot, PromiseBook(), view, ReleasedBook(), cache, now=NOW, settings=SETTINGS, chain=chain
        )
        assert [k.rule for k in decision.kept] == [KeptRule.NODE]
        bed.state.remove_pod(pod.uid)
    allowed = NodeFacts.of(chain.open(bed.state.snapshot())).allowed
    assert 0 < len(allowed) <= ALLOWED_KEPT
