"""The queue view and the release pass decide the same from the pods the state keeps as from every pod.

``ClusterState`` keeps the pods the queue rules walk (phalanx's live pods and any pod carrying its gate)
in a map of their own and what every other live pod holds as one sum (at 150,000 pods, rebuilding the
view from every pod each pass was the cost). A snapshot without them (``walked``) makes the same code walk
every pod as before; on random histories of changes both must give equal views, reasons and order
included, and the same release decision.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduling.admission.flight import ReleasedBook
from scheduling.admission.release import release
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.state import ClusterState, state_of
from scheduling.model import Resources
from scheduling.queues import Queue, ResourceQuota
from scheduling.queues.view import view_of
from scheduling.resources import ZERO
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod
from tests.scheduling.cluster.test_state import Event, events, feed, walked

QUEUES = [
    Queue("dept", gpu=ResourceQuota(6, 1)),
    Queue("team-a", parent="dept", gpu=ResourceQuota(4, 2)),
    Queue("team-b", parent="dept", gpu=ResourceQuota(2, 1)),
]
"""``team-a`` and ``team-b`` hold workloads; ``dept`` cannot (a pod naming it is misplaced), nor ``nope``."""


def _promises(state: ClusterState, promised: set[str]) -> PromiseBook:
    """Promises for the unbound pods among ``promised`` UIDs, as the extender's ledger holds them."""
    snap = state.snapshot()
    book = [
        Promise(p.uid, p.key, "n0", (), 99.0, p.requests)
        for uid in sorted(promised)
        if (p := snap.pod_by_uid(uid)) is not None and p.node_name is None
    ]
    return PromiseBook().add_all(book)


@settings(max_examples=300, deadline=None)
@given(events, st.sets(st.sampled_from(["u0", "u1", "u2", "u3", "u4"])))
def test_the_view_from_the_kept_queue_pods_equals_the_view_from_every_pod(
    history: list[Event], promised: set[str]
) -> None:
    state = state_of(queues=QUEUES)
    for event in history:
        feed(state, event, {}, {})
    snap, promises = state.snapshot(), _promises(state, promised)
    try:
        walking = view_of(walked(snap), promises)
    except ValueError as exc:  # other schedulers' pods hold more than the nodes have: the same refusal
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            view_of(snap, promises)
        return
    kept = view_of(snap, promises)
    assert kept == walking
    assert kept.pending == walking.pending
    assert dict(kept.positions) == dict(walking.positions)
    assert dict(kept.misplaced) == dict(walking.misplaced)


OTHERS_GATED: list[Event] = [
    ("put_pod", a_pod("u0").uid("u0").scheduler("default-scheduler").gated().build()),
    ("put_pod", a_pod("u1").uid("u1").queue("team-a").gpus(1).gated().build()),
]
"""A pod of another scheduler carrying phalanx's gate (released for its own scheduler), beside one of ours."""


@settings(max_examples=300, deadline=None)
@given(events)
@example(OTHERS_GATED)
def test_the_release_pass_decides_the_same_from_the_kept_queue_pods(history: list[Event]) -> None:
    state = state_of(queues=QUEUES)
    for event in history:
        feed(state, event, {}, {})
    snap = state.snapshot()
    try:
        view = view_of(walked(snap), PromiseBook())
    except ValueError:
        return  # the view test above covers the refusal
    topologies, book = TopologyCache(), ReleasedBook()
    assert release(snap, PromiseBook(), view, book, topologies, now=1000.0) == release(
        walked(snap), PromiseBook(), view, book, topologies, now=1000.0
    )


def test_other_schedulers_pods_only_take_capacity_and_finished_pods_nothing() -> None:
    state = state_of(
        nodes=[a_node("n0").gpus(8).cpu(16000).build()],
        pods=[
            a_pod("ours").uid("u1").queue("team-a").gpus(2).cpu(1000).on("n0", [0, 1]).build(),
            a_pod("theirs").uid("u2").scheduler("default-scheduler").gpus(1).cpu(3000).on("n0", [2]).build(),
            a_pod("done").uid("u3").queue("team-a").gpus(4).on("n0", [4, 5, 6, 7]).phase("Succeeded").build(),
            a_pod("waits").uid("u4").queue("team-b").gpus(1).build(),
        ],
        queues=QUEUES,
    )
    snap = state.snapshot()
    assert [p.name for p in snap.queue_pod_list()] == ["ours", "waits"]
    assert snap.held_elsewhere() == Resources(3000, 0, 1)
    view = view_of(snap, PromiseBook())
    assert view.capacity.gpus == 7  # 8 less the other scheduler's one
    assert view.free.gpus == 5  # 7 less the 2 of "ours"; the finished pod holds nothing
    assert [g.key for g in view.pending] == ["ml/waits"]
    assert view.states["team-b"].allocated == ZERO
