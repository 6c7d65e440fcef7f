from __future__ import annotations

from dataclasses import replace

from scheduling.cluster.promises import PromiseBook
from scheduling.model import Pod
from scheduling.queues import Queue, ResourceQuota
from scheduling.queues.view import build_queue_view, pending_of
from tests.builders import a_node, a_pod

NODES = [a_node(f"n{i}").build() for i in range(3)]  # 24 GPUs
QUEUES = [
    Queue("a", gpu=ResourceQuota(8, 1)),
    Queue("b", gpu=ResourceQuota(8, 1)),
    Queue("c", gpu=ResourceQuota(0, 2)),
]


def in_queue(pod: Pod, queue: str) -> Pod:
    return replace(pod, labels={"phalanx.io/queue": queue})


def test_the_issue_scenario_gives_the_fair_shares_of_the_run_ai_rule() -> None:
    running = [
        in_queue(a_pod(f"c{i}").gpus(4).on(f"n{i % 3}", range(4 * (i // 3), 4 * (i // 3) + 4)).build(), "c")
        for i in range(6)
    ]
    waiting = [in_queue(a_pod(f"{q}{i}").gpus(4).build(), q) for q in ("a", "b") for i in range(3)]
    view = build_queue_view(QUEUES, NODES, running + waiting, PromiseBook())
    gpus = {q: (view.shares[q].deserved.gpus, view.shares[q].fair_share.gpus) for q in ("a", "b", "c")}
    assert gpus == {"a": (8, 10), "b": (8, 10), "c": (0, 4)}
    assert view.states["c"].allocated.gpus == 24
    assert view.free.gpus == 0
    assert [g.queue for g in view.pending[:2]] == ["a", "b"], "queues below their deserved quota go first"


def test_pods_of_other_schedulers_shrink_capacity_and_unknown_queues_are_reported() -> None:
    other = replace(a_pod("x").gpus(8).on("n0", range(8)).build(), scheduler_name="default-scheduler")
    lost = in_queue(a_pod("lost").gpus(1).build(), "nope")
    view = build_queue_view(QUEUES, NODES, [other, lost], PromiseBook())
    assert view.capacity.gpus == 16
    assert view.misplaced == {"ml/lost": "queue nope does not exist"}


def test_queues_set_aside_leave_every_other_queue_as_it_was_and_their_pods_in_no_queue() -> None:
    held = [in_queue(a_pod(f"d{i}").gpus(4).on(f"n{i}", range(4)).build(), "d") for i in range(2)]
    waiting = [in_queue(a_pod(f"{q}{i}").gpus(4).build(), q) for q in ("a", "b", "c", "e") for i in range(2)]
    broken = [*QUEUES, Queue("d", parent="e"), Queue("e", parent="d")]
    view = build_queue_view(broken, NODES, held + waiting, PromiseBook())
    assert sorted(view.tree.queues) == ["a", "b", "c", "default"]
    assert view.problems == (
        "queue d: queues d, e form a parent cycle (d -> e -> d)",
        "queue e: queues d, e form a parent cycle (d -> e -> d)",
    )
    assert view.misplaced["ml/d0"] == (
        "queue d: queues d, e form a parent cycle (d -> e -> d); the queue is set aside until that is fixed"
    )
    assert sorted(view.misplaced) == ["ml/d0", "ml/d1", "ml/e0", "ml/e1"]
    # What d's pods hold comes off every queue's capacity, as if they were another scheduler's pods.
    without = build_queue_view(QUEUES, NODES, held + waiting, PromiseBook())
    assert view.capacity.gpus == without.capacity.gpus == 16
    assert view.shares == without.shares
    assert [g.key for g in view.pending] == [g.key for g in without.pending]


def test_a_group_newer_than_the_view_queues_behind_every_group_in_it() -> None:
    waiting = [in_queue(a_pod(f"{q}{i}").gpus(4).build(), q) for q in ("a", "b") for i in range(2)]
    view = build_queue_view(QUEUES, NODES, waiting, PromiseBook())
    first = view.pending[0].key
    assert view.ahead_of(first) == ()
    assert [g.key for g in view.ahead_of("ml/new")] == [g.key for g in view.pending]
    assert len(view.ahead_of("ml/new", limit=3)) == 3


def test_a_parent_queues_pending_is_the_sum_of_its_leaves() -> None:
    queues = [
        Queue("team", gpu=ResourceQuota(8, 1)),
        Queue("a", parent="team", gpu=ResourceQuota(4, 1)),
        Queue("b", parent="team", gpu=ResourceQuota(4, 1)),
        Queue("other", gpu=ResourceQuota(8, 1)),
    ]
    waiting = [
        in_queue(a_pod("a0").gpus(2).cpu(1000).build(), "a"),
        in_queue(a_pod("a1").gpus(4).build(), "a"),
        in_queue(a_pod("b0").gpus(1).build(), "b"),
        in_queue(a_pod("o0").gpus(8).build(), "other"),
    ]
    view = build_queue_view(queues, NODES, waiting, PromiseBook())
    leaves = {name: pending_of(view, name) for name in ("a", "b", "other")}
    assert {name: r.gpus for name, r in leaves.items()} == {"a": 6, "b": 1, "other": 8}
    team = pending_of(view, "team")
    assert team.gpus == leaves["a"].gpus + leaves["b"].gpus == 7
    assert team.milli_cpu == leaves["a"].milli_cpu + leaves["b"].milli_cpu
