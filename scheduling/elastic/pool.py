"""What one elastic round divides: the pool of GPUs elastic jobs may hold, and each queue's deficit.

Both figures used to be computed by the placement manager's elastic pass; they are decisions (how much a
waiting gang takes back from elastic surplus, which queue grows first), so they live in the core where
the placement manager and the simulator read the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic.elastic_planner import elastic_room
from scheduling.elastic.job import ElasticJob
from scheduling.queues.view import QueueView


def elastic_pool(snapshot: ClusterSnapshot, view: QueueView | None, jobs: Sequence[ElasticJob]) -> int:
    """The GPUs elastic jobs may hold: the room the layout divides, less what other waiting groups need.

    Waiting groups that are not elastic jobs come first: an elastic job shrinks toward its minimum
    before a waiting gang would have to evict anything (KAI's elastic rule).
    """
    elastic = {job.key for job in jobs}
    waiting = sum(g.requests.gpus for g in (view.pending if view else ()) if g.key not in elastic)
    return max(0, sum(elastic_room(snapshot, jobs).values()) - waiting)


def queue_deficits(view: QueueView | None) -> dict[str, int]:
    """Per queue, its fair share of GPUs less what it holds (negative: above its share), by name."""
    if view is None:
        return {}
    return {
        name: view.shares[name].fair_share.gpus - state.allocated.gpus
        for name, state in sorted(view.states.items())
    }
