"""How many workers each elastic job runs: its minimum first, then free GPUs by its queue's fair share.

Every elastic job gets its minimum (its gang: the rule that makes it run at all). The GPUs left in the
pool go one worker at a time to the job whose queue is furthest below its fair share (deficit in GPUs,
largest first), then to the job with the fewest workers above its minimum (so one queue's jobs grow
evenly), then to the oldest, then by name, until the pool is spent or every job is at its maximum.
The pool is what elastic jobs may hold in all: the free GPUs plus what their workers hold now, less
what waiting gangs need, so a gang that needs room takes it from the elastic surplus first (as KAI's
elastic rule does) and an elastic job shrinks for it without being evicted.

``divide_pool`` is the one-worker-at-a-time division both sizing rules use: this even rule, and the
goodput rule of ``scheduling.elastic.gain``, which ranks by its score before the fewest workers.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from scheduling.elastic.job import ElasticJob


def size_jobs(jobs: Sequence[ElasticJob], pool_gpus: int, deficits: Mapping[str, int]) -> dict[str, int]:
    """The target number of workers of every job, by job key.

    Args:
        jobs: the elastic jobs (declarations already checked).
        pool_gpus: the GPUs elastic jobs may hold in all.
        deficits: per queue, its fair share less its allocation, in GPUs (negative: over its share).

    >>> from scheduling.model import Resources
    >>> a = ElasticJob("ml/a", "qa", 1, 4, Resources(gpus=2), created="1")
    >>> b = ElasticJob("ml/b", "qb", 1, 4, Resources(gpus=2), created="2")
    >>> size_jobs([a, b], 10, {"qa": 2, "qb": 6})
    {'ml/a': 2, 'ml/b': 3}
    """
    return divide_pool(jobs, pool_gpus, deficits, _even, {}, {})


def _even(_job: ElasticJob, _workers: int) -> float:
    """Every worker claims the same: the deficit, then the fewest above the minimum, decide."""
    return 0.0


Score = Callable[[ElasticJob, int], float]
"""A job's claim on one more worker when it has ``k``."""


def divide_pool(
    jobs: Sequence[ElasticJob],
    pool_gpus: int,
    deficits: Mapping[str, int],
    score: Score,
    floors: Mapping[str, int],
    caps: Mapping[str, int],
) -> dict[str, int]:
    """Workers per job: ``floors`` (default its minimum) first, then one at a time by rank up to ``caps``.

    Ranked by its queue's deficit, then its score, then the fewest workers above its minimum, the
    oldest, the name (see the module docstring).
    """
    targets = {job.key: floors.get(job.key, job.min_workers) for job in jobs}
    left = pool_gpus - sum(targets[job.key] * job.worker.gpus for job in jobs)
    deficit = dict(deficits)
    for job in jobs:
        given = (targets[job.key] - job.min_workers) * job.worker.gpus
        deficit[job.queue] = deficit.get(job.queue, 0) - given
    by_key = {job.key: job for job in jobs}

    def cap(job: ElasticJob) -> int:
        return min(caps.get(job.key, job.max_workers), job.max_workers)

    def rank(job: ElasticJob) -> tuple[int, float, int, str, str]:
        above = targets[job.key] - job.min_workers
        return (-deficit.get(job.queue, 0), -score(job, targets[job.key]), above, job.created, job.key)

    heap = [(rank(job), job.key) for job in jobs if targets[job.key] < cap(job)]
    heapq.heapify(heap)
    while heap:
        stale_rank, key = heapq.heappop(heap)
        job = by_key[key]
        if stale_rank != rank(job):  # its queue's deficit moved since it was pushed: requeue
            heapq.heappush(heap, (rank(job), key))
            continue
        if job.worker.gpus > left:
            continue
        targets[key] += 1
        left -= job.worker.gpus
        deficit[job.queue] = deficit.get(job.queue, 0) - job.worker.gpus
        if targets[key] < cap(job):
            heapq.heappush(heap, (rank(job), key))
    return targets
