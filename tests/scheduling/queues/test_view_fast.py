"""The queue view built the fast way equals the view of the rule as first written, on random clusters.

``build_queue_view`` sums allocations as integers while it walks every pod, and ``order_pending`` skips
the fair-order keys when only one queue has groups waiting (the view is rebuilt from every pod once a
second, so its cost matters). The reference below is the code before those changes; every field of the
view must come out equal, including the order of the pending groups and their positions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.model import SCHEDULER_NAME, Node, Pod, Resources, group_key
from scheduling.queues import (
    PREEMPTIBLE_LABEL,
    QUEUE_LABEL,
    PendingGroup,
    Queue,
    QueueError,
    QueueTree,
    ResourceQuota,
    RunningGang,
    fair_shares,
    is_preemptible,
    queue_states,
)
from scheduling.queues.view import QueueView, build_queue_view
from scheduling.resources import ZERO, minus, plus, total
from tests.builders import a_node, a_pod
from tests.scheduling.queues.test_ordering_fast import reference_order


def reference_pending_group(pod: Pod, members: Iterable[Pod], tree: QueueTree) -> PendingGroup:
    """``pending_group`` as first written."""
    queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    waiting = [m for m in members if m.node_name is None and not m.terminating] or [pod]
    return PendingGroup(
        key=group_key(pod),
        queue=queue,
        requests=total(m.requests for m in waiting),
        priority=pod.priority,
        created=min(m.created for m in waiting),
        preemptible=is_preemptible(pod.priority, pod.labels.get(PREEMPTIBLE_LABEL)),
    )


def reference_running(key: str, members: Sequence[Pod], tree: QueueTree) -> RunningGang:
    """``_running`` as first written."""
    first = min(members, key=lambda p: p.name)
    return RunningGang(
        key=key,
        queue=tree.workload_queue(first.labels.get(QUEUE_LABEL)),
        requests=total(m.requests for m in members),
        preemptible=all(is_preemptible(m.priority, m.labels.get(PREEMPTIBLE_LABEL)) for m in members),
        priority=max(m.priority for m in members),
        started_at=max((m.started_at or 0.0) for m in members),
    )


def reference_view(
    queues: Sequence[Queue],
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    promises: PromiseBook,
) -> QueueView:
    """``build_queue_view`` as first written (``plus`` per pod, the plain fair order)."""
    tree = QueueTree.build(queues)
    capacity = total(n.allocatable for n in nodes if n.ready and not n.unschedulable)
    allocated: dict[str, Resources] = {}
    non_preemptible: dict[str, Resources] = {}
    running: dict[str, list[Pod]] = {}
    waiting: dict[str, list[Pod]] = {}
    misplaced: dict[str, str] = {}
    counted: set[str] = set()
    for pod in pods:
        if pod.scheduler_name != SCHEDULER_NAME:
            if pod.holds_resources:
                capacity = minus(capacity, pod.requests)
            continue
        try:
            queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
        except QueueError as exc:
            misplaced[pod.key] = str(exc)
            if pod.holds_resources:  # a pod in no queue takes capacity away from all, as another scheduler's
                capacity = minus(capacity, pod.requests)
            continue
        if pod.holds_resources or pod.uid in promises.by_uid:
            counted.add(pod.uid)
            allocated[queue] = plus(allocated.get(queue, ZERO), pod.requests)
            if not is_preemptible(pod.priority, pod.labels.get(PREEMPTIBLE_LABEL)):
                non_preemptible[queue] = plus(non_preemptible.get(queue, ZERO), pod.requests)
        if pod.holds_resources:
            running.setdefault(group_key(pod), []).append(pod)
        elif pod.node_name is None and not pod.terminating and pod.uid not in promises.by_uid:
            waiting.setdefault(group_key(pod), []).append(pod)
    pending = [reference_pending_group(members[0], members, tree) for _, members in sorted(waiting.items())]
    demand = dict(allocated)
    for group in pending:
        demand[group.queue] = plus(demand.get(group.queue, ZERO), group.requests)
    shares = fair_shares(tree, capacity, demand)
    states = queue_states(tree, shares, allocated, non_preemptible)
    free = minus(capacity, total(allocated.values()))
    ordered = reference_order(pending, states, capacity)
    return QueueView(
        tree=tree,
        problems=tree.problems,
        capacity=capacity,
        free=free,
        shares=shares,
        states=states,
        pending=ordered,
        running=tuple(reference_running(key, members, tree) for key, members in sorted(running.items())),
        misplaced=MappingProxyType(misplaced),
        counted=frozenset(counted),
        positions=MappingProxyType({g.key: i for i, g in enumerate(ordered)}),
    )


QUEUE_SETS = {
    "none": [],
    "one": [Queue("q0", gpu=ResourceQuota(8, 1))],
    "three": [Queue(f"q{i}", gpu=ResourceQuota(4 * i, 1 + i)) for i in range(3)],
    "nested": [
        Queue("dept", gpu=ResourceQuota(12, 1)),
        Queue("q0", parent="dept", gpu=ResourceQuota(4, 2)),
        Queue("q1", parent="dept", gpu=ResourceQuota(8, 1)),
        Queue("q2", gpu=ResourceQuota(0, 3)),
    ],
    "one set aside": [  # q1 does not fit dept's quota beside q0: its pods are in no queue
        Queue("dept", gpu=ResourceQuota(8, 1)),
        Queue("q0", parent="dept", gpu=ResourceQuota(4, 2), created="2026-01-01T00:00:00Z"),
        Queue("q1", parent="dept", gpu=ResourceQuota(8, 1), created="2026-01-02T00:00:00Z"),
        Queue("q2", gpu=ResourceQuota(0, 3)),
    ],
}


class PodSpec(NamedTuple):
    queue: str | None
    gpus: int
    cpu: int
    node: str | None
    phase: str
    terminating: bool
    other_scheduler: bool
    priority: int
    preemptible: str | None
    group: str | None
    created: int
    promised: bool
    started: int


POD = st.builds(
    PodSpec,
    queue=st.sampled_from([None, "q0", "q1", "q2", "dept", "nope"]),
    gpus=st.integers(0, 4),
    cpu=st.sampled_from([0, 500, 4000]),
    node=st.sampled_from([None, None, "n0", "n1", "n2"]),
    phase=st.sampled_from(["Pending", "Running", "Running", "Succeeded", "Failed"]),
    terminating=st.booleans(),
    other_scheduler=st.integers(0, 5).map(lambda i: i == 0),
    priority=st.sampled_from([0, 50, 100, 200]),
    preemptible=st.sampled_from([None, "true", "false"]),
    group=st.sampled_from([None, None, "g0", "g1"]),
    created=st.integers(0, 9),
    promised=st.integers(0, 4).map(lambda i: i == 0),
    started=st.integers(0, 3),
)


def _pods(specs: list[PodSpec]) -> tuple[list[Pod], PromiseBook]:
    pods, promises = [], []
    for i, spec in enumerate(specs):
        builder = a_pod(f"p{i:02d}").gpus(spec.gpus).cpu(spec.cpu).priority(spec.priority)
        builder = builder.created(f"2026-11-22T00:00:0{spec.created}Z")
        if spec.queue is not None:
            builder = builder.queue(spec.queue)
        if spec.preemptible is not None:
            builder = builder.label(PREEMPTIBLE_LABEL, spec.preemptible)
        if spec.group is not None:
            builder = builder.group(spec.group)
        if spec.node is not None:
            builder = builder.on(spec.node)
        if spec.terminating:
            builder = builder.terminating()
        if spec.started:
            builder = builder.started(100.0 * spec.started)
        pod = replace(builder.phase(spec.phase).build(), uid=f"uid-{i}")
        if spec.other_scheduler:
            pod = replace(pod, scheduler_name="default-scheduler")
        pods.append(pod)
        if spec.promised and pod.node_name is None:
            promises.append(Promise(pod.uid, pod.key, "n0", (), 99.0, pod.requests))
    return pods, PromiseBook().add_all(promises)


@settings(max_examples=200, deadline=None)
@given(
    queues=st.sampled_from(sorted(QUEUE_SETS)),
    node_states=st.lists(
        st.sampled_from(["ready", "ready", "not_ready", "cordoned"]), min_size=1, max_size=3
    ),
    specs=st.lists(POD, max_size=40),
)
def test_the_fast_view_equals_the_reference_on_random_clusters(
    queues: str, node_states: list[str], specs: list[PodSpec]
) -> None:
    nodes = []
    for i, state in enumerate(node_states):
        builder = a_node(f"n{i}")
        if state == "not_ready":
            builder = builder.not_ready()
        elif state == "cordoned":
            builder = builder.cordoned()
        nodes.append(builder.build())
    pods, promises = _pods(specs)
    live = [p for p in pods if p.phase not in ("Succeeded", "Failed")]
    try:
        slow = reference_view(QUEUE_SETS[queues], nodes, live, promises)
    except ValueError as exc:  # e.g. other schedulers' pods hold more than the nodes have
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            build_queue_view(QUEUE_SETS[queues], nodes, live, promises)
        return
    fast = build_queue_view(QUEUE_SETS[queues], nodes, live, promises)
    assert fast == slow
    assert fast.pending == slow.pending  # order included (tuple equality), and their positions:
    assert dict(fast.positions) == dict(slow.positions)
    assert list(fast.states) == list(slow.states)
