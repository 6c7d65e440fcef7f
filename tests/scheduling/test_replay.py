from __future__ import annotations

from scheduling.promises import PromiseBook
from scheduling.queue_gate import AdmittedBook, TriedBook
from scheduling.queue_view import view_of
from scheduling.replay import replay_filter, save_filter
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

BIG = a_pod("big").gpus(6).queue("a").created("2026-01-01T00:00:00Z").build()
LATE = a_pod("late").gpus(4).queue("a").created("2026-01-02T00:00:00Z").build()


def test_a_replay_reads_when_each_group_was_last_tried() -> None:
    """LATE was let through because BIG had not been tried for a minute; the replay must agree."""
    snapshot = snapshot_of([a_node("n1").build()], [BIG, LATE], queues=[gpu_queue("a", quota=8)])
    view = view_of(snapshot, PromiseBook(), None)
    tried = TriedBook().with_try(BIG.key, 40.0)
    asked = FilterInput(LATE, ("n1",), snapshot, PromiseBook(), view, AdmittedBook(), 100.0, tried)
    settings = SessionSettings()
    outcome = filter_pod(asked, topologies=TopologyCache(), settings=settings)
    assert outcome.feasible == ("n1",)
    now, then = replay_filter(save_filter(asked, outcome, settings), TopologyCache())
    assert now == then
