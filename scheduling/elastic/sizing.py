"""How many workers each elastic job runs: its minimum first, then free GPUs by its queue's fair share.

Every elastic job gets its minimum (its gang: the rule that makes it run at all). The GPUs left in the
pool go one worker at a time to the job whose queue is furthest below its fair share (deficit in GPUs,
largest first), then to the job with the fewest workers above its minimum (so one queue's jobs grow
evenly), then to the oldest, then by name, until the pool is spent or every job is at its maximum.
The pool is what elastic jobs may hold in all: the free GPUs plus what their workers hold now, less
what waiting gangs need, so a gang that needs room takes it from the elastic surplus first (as KAI's
elastic rule does) and an elastic job shrinks for it without being evicted.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

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
    targets = {job.key: job.min_workers for job in jobs}
    left = pool_gpus - sum(job.min_workers * job.worker.gpus for job in jobs)
    deficit = dict(deficits)
    by_key = {job.key: job for job in jobs}

    def rank(job: ElasticJob) -> tuple[int, int, str, str]:
        return (-deficit.get(job.queue, 0), targets[job.key] - job.min_workers, job.created, job.key)

    heap = [(rank(job), job.key) for job in jobs if job.min_workers < job.max_workers]
    heapq.heapify(heap)
    while heap:
        stale_rank, key = heapq.heappop(heap)
        job = by_key[key]
        if stale_rank != rank(job):  # its queue's deficit moved since it was pushed: requeue
            heapq.heappush(heap, (rank(job), key))
            continue
        if job.worker.gpus > left:
            continue  # this job's next worker does not fit the pool; smaller ones may
        targets[key] += 1
        left -= job.worker.gpus
        deficit[job.queue] = deficit.get(job.queue, 0) - job.worker.gpus
        if targets[key] < job.max_workers:
            heapq.heappush(heap, (rank(job), key))
    return targets
