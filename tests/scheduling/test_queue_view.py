from __future__ import annotations

from dataclasses import replace

from scheduling.model import Pod
from scheduling.promises import PromiseBook
from scheduling.queue_view import build_queue_view, pending_of
from scheduling.queues import Queue, ResourceQuota
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
    view = build_queue_view(QUEUES, None, NODES, running + waiting, PromiseBook())
    gpus = {q: (view.shares[q].deserved.gpus, view.shares[q].fair_share.gpus) for q in ("a", "b", "c")}
    assert gpus == {"a": (8, 10), "b": (8, 10), "c": (0, 4)}
    assert view.states["c"].allocated.gpus == 24
    assert view.free.gpus == 0
    assert [g.queue for g in view.pending[:2]] == ["a", "b"], "queues below their deserved quota go first"


def test_pods_of_other_schedulers_shrink_capacity_and_unknown_queues_are_reported() -> None:
    other = replace(a_pod("x").gpus(8).on("n0", range(8)).build(), scheduler_name="default-scheduler")
    lost = in_queue(a_pod("lost").gpus(1).build(), "nope")
    view = build_queue_view(QUEUES, None, NODES, [other, lost], PromiseBook())
    assert view.capacity.gpus == 16
    assert view.misplaced == {"ml/lost": "queue nope does not exist"}


def test_an_invalid_queue_set_keeps_the_last_valid_tree() -> None:
    good = build_queue_view(QUEUES, None, NODES, [], PromiseBook())
    broken = [*QUEUES, Queue("d", parent="e"), Queue("e", parent="d")]
    view = build_queue_view(broken, good.tree, NODES, [], PromiseBook())
    assert view.tree is good.tree
    assert any("cycle" in p for p in view.problems)


def test_a_group_newer_than_the_view_queues_behind_every_group_in_it() -> None:
    waiting = [in_queue(a_pod(f"{q}{i}").gpus(4).build(), q) for q in ("a", "b") for i in range(2)]
    view = build_queue_view(QUEUES, None, NODES, waiting, PromiseBook())
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
    view = build_queue_view(queues, None, NODES, waiting, PromiseBook())
    leaves = {name: pending_of(view, name) for name in ("a", "b", "other")}
    assert {name: r.gpus for name, r in leaves.items()} == {"a": 6, "b": 1, "other": 8}
    team = pending_of(view, "team")
    assert team.gpus == leaves["a"].gpus + leaves["b"].gpus == 7
    assert team.milli_cpu == leaves["a"].milli_cpu + leaves["b"].milli_cpu
