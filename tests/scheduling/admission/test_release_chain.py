"""A release pass that starts from the last pass's statement decides exactly as one that starts afresh.

The placement manager keeps its passes' and its door's statements in one ``StatementChain``, so each
pass looks again only at the nodes that changed (node orders, domain sums, the nodes a pod's selector
allows, the capacity). A random sequence of cluster changes between passes (pods created gated,
released pods bound, running pods finished, nodes relabelled, cordoned, resized, removed) must leave
every decision equal to that of a pass with no chain, on the same snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.outcome import PodPlan
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

CARRIED = replace(SETTINGS, plan_on_pod=True)
KINDS = ["create", "create", "create", "bind", "finish", "pool", "cordon", "resize", "remove"]
"""Cluster changes; with plans carried, also a bind on the pod's plan and kube-scheduler refusing one."""

CHANGE = st.tuples(
    st.sampled_from(KINDS),
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
        elif what == "bind-planned":
            planned = [p for p in pods if not p.gated and p.node_name is None and p.plan is not None]
            if planned:
                pod = planned[i % len(planned)]
                room = Statement(snapshot).room(pod.plan[0]) if pod.plan else None
                if pod.plan is not None and room is not None and room.taking(pod, pod.plan[1]) is not None:
                    self.state.put_pod(replace(pod, node_name=pod.plan[0], gpu_indices=pod.plan[1]))
        elif what == "refuse":
            planned = [p for p in pods if not p.gated and p.node_name is None and p.plan is not None]
            if planned:
                pod = planned[i % len(planned)]
                self.state.put_pod(replace(pod, unschedulable=True, planned_at=NOW - 3600.0))
        elif what == "cancel":  # a released pod deleted before it was bound: its plan holds nothing now
            ungated = [p for p in pods if not p.gated and p.node_name is None]
            if ungated:
                self.state.remove_pod(ungated[i % len(ungated)].uid)
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

    def ungate(self, keys: list[str], plans: Sequence[PodPlan] = ()) -> None:
        """The released pods, ungated as the placement manager's patch does, with their ``plans`` written."""
        snapshot = self.state.snapshot()
        written = {p.pod: (p.node, p.gpus) for p in plans}
        for key in sorted({*keys, *written}):
            namespace, name = key.split("/")
            pod = snapshot.pod(namespace, name)
            if pod is not None and pod.node_name is None:
                plan = written.get(key, pod.plan)
                fresh = key in written
                self.state.put_pod(
                    replace(
                        pod,
                        gates=(),
                        plan=plan,
                        planned_at=NOW if fresh else pod.planned_at,
                        unschedulable=pod.unschedulable and not fresh,
                    )
                )


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.lists(CHANGE, max_size=5), min_size=1, max_size=10))
def test_a_chained_pass_decides_as_a_fresh_one(steps: list[list[tuple[str, int, int, str | None]]]) -> None:
    chain_and_compare(steps, SETTINGS)


def chain_and_compare(steps: list[list[tuple[str, int, int, str | None]]], gates: GateSettings) -> None:
    """After each step's changes, a chained pass and a fresh one on the same snapshot must agree.

    The released pods are then ungated, with the plans the pass wrote (released or planned again),
    as the placement manager's patches do.
    """
    bed, chain, cache = Bed(), StatementChain(), TopologyCache()
    book = ReleasedBook()
    for changes in steps:
        for change in changes:
            bed.change(*change)
        snapshot = bed.state.snapshot()
        view = view_of(snapshot, PromiseBook())
        chained = release(snapshot, PromiseBook(), view, book, cache, now=NOW, settings=gates, chain=chain)
        fresh = release(snapshot, PromiseBook(), view, book, cache, now=NOW, settings=gates)
        assert chained == fresh
        book = chained.in_flight
        plans = [*(p for r in chained.released for p in r.plans), *chained.replanned]
        bed.ungate([key for r in chained.released for key in r.pods], plans)


CARRIED_CHANGE = st.tuples(
    st.sampled_from([*KINDS, "bind-planned", "bind-planned", "refuse", "cancel"]),
    st.integers(0, NODES - 1),
    st.sampled_from([1, 1, 2, 4, 8]),
    st.sampled_from([None, "a", "b"]),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(st.lists(CARRIED_CHANGE, max_size=5), min_size=1, max_size=10))
@example(  # a deleted released pod frees its planned GPUs on a node no change names: memos look again
    steps=[
        [("create", 0, 1, None)] * 4 + [("create", 1, 1, None), ("resize", 0, 1, None)],
        [("create", 0, 1, None), ("bind", 1, 1, None)],
        [("cancel", 0, 1, None)],
    ]
)
def test_with_plans_carried_a_chained_pass_holds_and_plans_as_a_fresh_one(
    steps: list[list[tuple[str, int, int, str | None]]],
) -> None:
    """The plans in flight held per node across passes (``HeldPlans``) decide as holding them afresh.

    Plans are written as the placement manager writes them (released and planned again); binds land on
    a plan or elsewhere (breaking plans), kube-scheduler turns plans down, and released pods are deleted
    before they bind (their nodes' held rooms change with no node changed).
    """
    chain_and_compare(steps, CARRIED)


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
