"""The queue view shared by the placement manager's passes: one build per cluster version."""

from __future__ import annotations

from placement.views import SharedView
from scheduling.cluster.state import state_of
from scheduling.queues import Queue, ResourceQuota
from tests.builders import a_gang, a_node, a_pod

QUEUES = [Queue("team-a", gpu=ResourceQuota(4, 1))]


def test_a_snapshot_of_the_same_version_gets_the_view_already_built() -> None:
    state = state_of(nodes=[a_node("n0").gpus(8).build()], queues=QUEUES)
    views = SharedView()
    first = views.of(state.snapshot())
    state.put_group(a_gang("g", 2))  # a new snapshot object, the same version: PodGroups are not in the view
    assert views.of(state.snapshot()) is first


def test_a_change_the_view_reads_gets_a_new_view_that_shows_it() -> None:
    state = state_of(nodes=[a_node("n0").gpus(8).build()], queues=QUEUES)
    views = SharedView()
    before = views.of(state.snapshot())
    state.put_pod(a_pod("p").queue("team-a").gpus(3).on("n0", [0, 1, 2]).build())
    after = views.of(state.snapshot())
    assert before.states["team-a"].allocated.gpus == 0
    assert after.states["team-a"].allocated.gpus == 3


def test_a_queue_set_aside_leaves_the_others_in_force() -> None:
    state = state_of(nodes=[a_node("n0").gpus(8).build()], queues=QUEUES)
    views = SharedView()
    views.of(state.snapshot())
    state.put_queue(Queue("orphan", parent="missing"))
    view = views.of(state.snapshot())
    assert view.problems == ("queue orphan: parent missing does not exist",)
    assert "team-a" in view.tree.queues
    assert "orphan" not in view.tree.queues


def test_a_deleted_queue_leaves_the_view_even_while_another_queue_is_invalid() -> None:
    """It used to stay in force, its limit enforced, from the last valid tree."""
    state = state_of(
        nodes=[a_node("n0").gpus(8).build()], queues=[*QUEUES, Queue("capped", gpu=ResourceQuota(0, 1, 0))]
    )
    views = SharedView()
    assert "capped" in views.of(state.snapshot()).tree.queues
    state.put_queue(Queue("orphan", parent="missing"))
    views.of(state.snapshot())
    state.remove_queue("capped")
    assert "capped" not in views.of(state.snapshot()).tree.queues
