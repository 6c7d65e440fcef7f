from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from scheduling.admission.queue_hold import (
    ADMITTED_TTL,
    TRIED_FRESH,
    AdmittedBook,
    AdmittedGroup,
    TriedBook,
    hold_for_queue,
    no_longer_ahead,
    still_waiting,
)
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod
from scheduling.queues import Queue
from scheduling.queues.view import view_of
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue, gpus, group

NODES = [a_node("n1").build(), a_node("n2").build()]  # 16 GPUs


def gate(
    pod: Pod,
    now: Sequence[Pod],
    *,
    then: Sequence[Pod],
    queues: Sequence[Queue],
    admitted: AdmittedBook = AdmittedBook(),  # noqa: B008 (an immutable value)
    at: float = 0.0,
) -> str | None:
    """The gate's sentence for ``pod`` with a view built from ``then`` and a snapshot holding ``now``."""
    view = view_of(snapshot_of(NODES, then, queues=queues), PromiseBook())
    snapshot = snapshot_of(NODES, now, queues=queues)
    free = snapshot.free_total(PromiseBook())
    return hold_for_queue(pod, snapshot, PromiseBook(), view, admitted, now=at, free=free).held


FIRST = a_pod("first").gpus(4).queue("a").build()
SECOND = a_pod("second").gpus(4).queue("a").build()
FIRST_ADMITTED = AdmittedBook().with_group(
    "ml/first", AdmittedGroup("a", gpus(4), frozenset({FIRST.uid}), expires_at=ADMITTED_TTL)
)
FIRST_BOUND = a_pod("first").gpus(4).queue("a").on("n1", range(4)).build()
OVER_6 = "queue a: over its GPU limit (limit 6, allocated 4, this job needs 4)"

# (queue a's GPU limit, is FIRST bound in the view, the clock, the sentence for SECOND)
IN_FLIGHT = {
    "a group admitted a moment ago counts against its queue": (6, False, 1.0, OVER_6),
    "it stops counting after ADMITTED_TTL": (6, False, ADMITTED_TTL + 0.5, None),
    "it stops counting once the view counts its pods": (8, True, 1.0, None),
    "the view's count holds on its own": (6, True, 1.0, OVER_6),
}


@pytest.mark.parametrize(("limit", "bound", "at", "held"), IN_FLIGHT.values(), ids=IN_FLIGHT.keys())
def test_groups_admitted_since_the_view_count_until_the_view_does(
    limit: int, bound: bool, at: float, held: str | None
) -> None:
    first = FIRST_BOUND if bound else FIRST
    answer = gate(
        SECOND,
        [first, SECOND],
        then=[first, SECOND],
        queues=[gpu_queue("a", quota=4, limit=limit)],
        admitted=FIRST_ADMITTED,
        at=at,
    )
    assert answer == held


KEEP = "phalanx.io/preemptible"
NP_FIRST = a_pod("first").gpus(8).queue("a").label(KEEP, "false").build()
NP_SECOND = a_pod("second").gpus(4).queue("a").label(KEEP, "false").build()
OVER_QUOTA = (
    "queue a: non-preemptible jobs run only within the queue's quota "
    "(GPU quota 8, 8 held by non-preemptible jobs, this job needs 4)"
)


@pytest.mark.parametrize(
    ("preemptible", "held"),
    [(False, OVER_QUOTA), (True, None)],
    ids=["a non-preemptible one counts against the quota", "a preemptible one does not"],
)
def test_a_group_admitted_a_moment_ago_counts_against_the_non_preemptible_quota(
    preemptible: bool, held: str | None
) -> None:
    """Two non-preemptible groups admitted within the view's lag must not together pass the quota."""
    first = NP_FIRST if not preemptible else a_pod("first").gpus(8).queue("a").build()
    admitted = AdmittedBook().with_group(
        "ml/first", AdmittedGroup("a", gpus(8), frozenset({first.uid}), ADMITTED_TTL, preemptible)
    )
    bound = replace(first, node_name="n1", gpu_indices=tuple(range(8)), phase="Running")
    queues = [gpu_queue("a", quota=8)]
    assert (
        gate(NP_SECOND, [bound, NP_SECOND], then=[first, NP_SECOND], queues=queues, admitted=admitted, at=1.0)
        == held
    )


def test_a_let_through_non_preemptible_group_is_recorded_as_such() -> None:
    snapshot = snapshot_of(NODES, [NP_SECOND], queues=[gpu_queue("a", quota=8)])
    view = view_of(snapshot, PromiseBook())
    answer = hold_for_queue(
        NP_SECOND,
        snapshot,
        PromiseBook(),
        view,
        AdmittedBook(),
        now=0.0,
        free=snapshot.free_total(PromiseBook()),
    )
    assert answer.admitted is not None and answer.admitted[1].preemptible is False


def test_a_group_does_not_count_against_itself() -> None:
    own = AdmittedBook().with_group(
        SECOND.key, AdmittedGroup("a", gpus(4), frozenset({SECOND.uid}), expires_at=ADMITTED_TTL)
    )
    queues = [gpu_queue("a", quota=4, limit=4)]
    assert gate(SECOND, [SECOND], then=[SECOND], queues=queues, admitted=own, at=1.0) is None


def test_a_let_through_group_is_recorded_with_its_waiting_members_and_expiry() -> None:
    snapshot = snapshot_of(NODES, [SECOND], queues=[gpu_queue("a", quota=8)])
    view = view_of(snapshot, PromiseBook())
    free = snapshot.free_total(PromiseBook())
    answer = hold_for_queue(SECOND, snapshot, PromiseBook(), view, AdmittedBook(), now=10.0, free=free)
    assert answer.admitted == (
        "ml/second",
        AdmittedGroup("a", gpus(4), frozenset({SECOND.uid}), 10.0 + ADMITTED_TTL),
    )


BIG = a_pod("big").gpus(8).queue("a").created("2026-01-01T00:00:00Z").build()
BIG_PLACED = a_pod("big").gpus(8).queue("a").on("n1", range(8)).build()
LATE = a_pod("late").gpus(12).queue("a").created("2026-01-02T00:00:00Z").build()
SMALL = a_pod("small").gpus(4).queue("a").created("2026-01-02T00:00:00Z").build()
HELD_FOR_BIG = (
    "queue a: the 16 GPUs free are needed by 1 group(s) ahead of this one (ml/big of queue a need 8); "
    "this job needs 12"
)


@pytest.mark.parametrize(
    ("pod", "big", "held"),
    [(LATE, BIG, HELD_FOR_BIG), (SMALL, BIG_PLACED, None)],
    ids=["a group ahead that still waits holds it", "a group ahead placed since the view does not"],
)
def test_only_groups_still_waiting_ahead_hold_a_group(pod: Pod, big: Pod, held: str | None) -> None:
    queues = [gpu_queue("a", quota=16)]
    assert gate(pod, [big, pod], then=[BIG, pod], queues=queues) == held


def test_without_a_view_every_group_is_admitted() -> None:
    snapshot = snapshot_of(NODES, [SECOND])
    answer = hold_for_queue(SECOND, snapshot, PromiseBook(), None, AdmittedBook(), now=0.0, free=gpus(0))
    assert (answer.held, answer.admitted) == (None, None)


def test_a_pod_of_an_unknown_queue_is_held_with_the_reason() -> None:
    lost = a_pod("lost").gpus(1).queue("nope").build()
    assert gate(lost, [lost], then=[lost], queues=[gpu_queue("a")]) == "queue nope does not exist"


GANG_DONE = [a_pod(f"d{i}").group("done").on("n1", [i]).build() for i in range(2)]
GANG_HALF = [a_pod("h0").group("half").on("n1", [2]).build(), a_pod("h1").group("half").build()]
GANG_DYING = [
    a_pod("x0").group("dying").on("n1", [3]).build(),
    a_pod("x1").group("dying").terminating().build(),
]
ALONE_BOUND = a_pod("solo").on("n2", [0]).build()
ALONE_WAITING = a_pod("wait").build()
ALONE_GATED = a_pod("gated").gated().build()
GANG_GATED = [a_pod(f"g{i}").group("closed").gated().build() for i in range(2)]
AHEAD = [
    group("done", "a", 2),
    group("half", "a", 2),
    group("dying", "a", 2),
    group("solo", "a", 1),
    group("wait", "a", 1),
    group("gone", "a", 1),
    group("gated", "a", 1),
    group("closed", "a", 2),
]


def test_still_waiting_keeps_groups_with_a_member_or_pod_left_to_place_and_not_gated() -> None:
    snapshot: ClusterSnapshot = snapshot_of(
        NODES, [*GANG_DONE, *GANG_HALF, *GANG_DYING, ALONE_BOUND, ALONE_WAITING, ALONE_GATED, *GANG_GATED]
    )
    assert [g.key for g in still_waiting(AHEAD, snapshot)] == ["ml/half", "ml/wait"]


def test_the_admitted_book_drops_expired_and_counted_entries_only() -> None:
    entry = AdmittedGroup("a", gpus(1), frozenset({"u1", "u2"}), expires_at=5.0)
    book = AdmittedBook().with_group("ml/g", entry)
    assert book.live(5.0, frozenset({"u1"})) is book
    assert book.live(5.1, frozenset()).by_group == {}
    assert book.live(1.0, frozenset({"u1", "u2", "u3"})).by_group == {}


def held_behind_big(
    tried: TriedBook | None, promises: PromiseBook, *, at: float, pod: Pod = LATE
) -> str | None:
    """The gate's sentence for ``pod``, with BIG ahead of it in queue a and both waiting."""
    queues = [gpu_queue("a", quota=16)]
    snapshot = snapshot_of(NODES, [BIG, pod], queues=queues)
    view = view_of(snapshot, PromiseBook())
    free = snapshot.free_total(promises)
    answer = hold_for_queue(pod, snapshot, promises, view, AdmittedBook(), now=at, free=free, tried=tried)
    return answer.held


BIG_TRIED_AT_100 = TriedBook().with_try(BIG.key, 100.0)

# (when kube-scheduler last tried BIG, the clock, the sentence for LATE)
COMPETING = {
    "a group ahead tried a moment ago keeps its room": (BIG_TRIED_AT_100, 105.0, HELD_FOR_BIG),
    "it still does at the edge of TRIED_FRESH": (BIG_TRIED_AT_100, 100.0 + TRIED_FRESH, HELD_FOR_BIG),
    "one kube-scheduler has not tried for longer does not": (BIG_TRIED_AT_100, 100.5 + TRIED_FRESH, None),
    "one never tried does not": (TriedBook(), 105.0, None),
    "without a book every group ahead counts (older saved decisions)": (None, 105.0, HELD_FOR_BIG),
}


@pytest.mark.parametrize(("tried", "at", "held"), COMPETING.values(), ids=COMPETING.keys())
def test_only_groups_kube_scheduler_is_trying_keep_their_room(
    tried: TriedBook | None, at: float, held: str | None
) -> None:
    assert held_behind_big(tried, PromiseBook(), at=at) == held


def test_a_reserved_group_ahead_is_not_counted_twice() -> None:
    """Its room is out of the free room already: counting its needs again would hold LATE for nothing."""
    reserved = PromiseBook.of(
        {BIG.uid: Promise(BIG.uid, BIG.key, "n1", tuple(range(8)), 1e9, BIG.requests, group=BIG.key)}
    )
    assert held_behind_big(None, reserved, at=105.0, pod=SMALL) is None


def test_the_book_forgets_groups_past_freshness_and_keeps_the_rest() -> None:
    book = TriedBook().with_try("ml/old", 1.0).with_try("ml/new", 20.0)
    pruned = book.pruned(20.0, TRIED_FRESH)
    assert dict(pruned.at) == {"ml/new": 20.0}
    assert pruned.pruned(20.0, TRIED_FRESH) is pruned


def test_a_group_held_for_groups_ahead_may_pass_once_they_are_not_ahead_any_more() -> None:
    queues = [gpu_queue("a", quota=16)]
    late_unknown = view_of(snapshot_of(NODES, [BIG], queues=queues), PromiseBook())
    both = view_of(snapshot_of(NODES, [BIG, LATE], queues=queues), PromiseBook())
    big_started = view_of(snapshot_of(NODES, [BIG_PLACED, LATE], queues=queues), PromiseBook())
    late_first = view_of(
        snapshot_of(NODES, [replace(BIG, created="2026-01-03T00:00:00Z"), LATE], queues=queues),
        PromiseBook(),
    )
    assert not no_longer_ahead(late_unknown, LATE.key, (BIG.key,)), "a new group queues behind"
    assert not no_longer_ahead(both, LATE.key, (BIG.key,))
    assert no_longer_ahead(big_started, LATE.key, (BIG.key,))
    assert no_longer_ahead(late_first, LATE.key, (BIG.key,))
