"""What one elastic round divides: the pool of GPUs elastic jobs may hold, and each queue's deficit.

Both figures used to be computed by the placement manager's elastic pass; they are decisions (how much a
waiting gang takes back from elastic surplus, which queue grows first), so they live in the core where
the placement manager and the simulator read the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic.elastic_planner import elastic_room
from scheduling.elastic.job import ElasticJob
from scheduling.model import Resources
from scheduling.queues.fair_share import fair_shares
from scheduling.queues.view import QueueView
from scheduling.resources import ZERO, plus


def elastic_pool(snapshot: ClusterSnapshot, view: QueueView | None, jobs: Sequence[ElasticJob]) -> int:
    """The GPUs elastic jobs may hold: the room the layout divides, less what other waiting groups need.

    Waiting groups that are not elastic jobs come first: an elastic job shrinks toward its minimum
    before a waiting gang would have to evict anything (KAI's elastic rule).
    """
    elastic = {job.key for job in jobs}
    waiting = sum(g.requests.gpus for g in (view.pending if view else ()) if g.key not in elastic)
    return max(0, sum(elastic_room(snapshot, jobs).values()) - waiting)


def queue_deficits(view: QueueView | None, jobs: Sequence[ElasticJob] = ()) -> dict[str, int]:
    """Per queue, its fair share of GPUs less what it holds with every elastic job at its minimum, by name.

    The division (``scheduling.elastic.sizing.divide_pool``) starts every elastic job from its minimum
    and charges each worker it gives to the job's queue, so the deficit it starts from must count the
    jobs at their minimum too, not at what they hold now: counted as they were, a job's workers were
    charged twice, and a resize still under way (its removed workers terminating, its new ones not yet
    running) moved the next round's targets again (seen on the test bed: 12 -> 6 -> 3 -> 6 workers).
    For the same reason an elastic job's demand in the fair-share division is its maximum, not its
    pods of the moment: a share that follows the job's own last resize is no fixed point.
    """
    if view is None:
        return {}
    elastic = {job.key: job for job in jobs}
    held: dict[str, int] = {}  # per queue: GPUs its elastic jobs' pods hold now (in its allocation)
    for gang in view.running:
        if gang.key in elastic:
            held[gang.queue] = held.get(gang.queue, 0) + gang.requests.gpus
    pending: dict[str, Resources] = {}
    for group in view.pending:
        if group.key not in elastic:
            pending[group.queue] = plus(pending.get(group.queue, ZERO), group.requests)
    floor: dict[str, int] = {}
    most: dict[str, int] = {}
    for job in jobs:
        floor[job.queue] = floor.get(job.queue, 0) + job.min_workers * job.worker.gpus
        most[job.queue] = most.get(job.queue, 0) + job.max_workers * job.worker.gpus
    base: dict[str, int] = {}
    demand: dict[str, Resources] = {}
    for name, state in sorted(view.states.items()):
        others = state.allocated.gpus - held.get(name, 0)
        base[name] = others + floor.get(name, 0)
        if view.tree.is_leaf(name):
            wanted = plus(state.allocated, pending.get(name, ZERO))
            gpus = others + pending.get(name, ZERO).gpus + most.get(name, 0)
            demand[name] = replace(wanted, gpus=max(0, gpus))
    shares = fair_shares(view.tree, view.capacity, demand) if jobs else view.shares
    return {name: shares[name].fair_share.gpus - base[name] for name in sorted(base)}
