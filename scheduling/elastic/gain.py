"""Sizing by marginal gain: each GPU of the pool to the job one more worker speeds up most.

Every job gets its minimum first, as with the even rule (``sizing``). The GPUs left go one worker at a
time; the next worker goes, in this order:

1. to a job of the queue furthest below its fair share (fairness stays the outer rule, as in the even
   rule: one queue's GPUs never buy another queue's speed);
2. within it, to the job whose *score* for one more worker is highest, where the score is

       (s(k + 1) / s(k) - 1) * las * keep

   - ``s`` the job's learned speedup (``throughput``) on the fewest nodes that hold ``k`` workers
     (the layout packs compactly): ``s(k + 1) / s(k) - 1`` is the share of its remaining time one more
     worker saves, so a job that scales almost linearly outbids one that does not, and a job on few
     workers outbids one on many (the share falls as it grows);
   - ``las``: least attained service (``scheduling.elastic.claim``): a job's claim halves at ten
     GPU-hours, and once it has run twenty it is long: its claim counts a tenth, and long jobs are
     served oldest first. The placement manager keeps each job's attained service on its MPIJob
     (``scheduling.elastic.attained``), so it survives the workers' restarts and its own;
   - for a worker the job holds now, ``keep = 1 + hysteresis`` and ``held = 2 * restart_seconds /
     gain_horizon_seconds``, so that the score is ``(gain * keep + held) * las``: a worker is taken
     from one job for another only when the other gains clearly more, and more than the two restarts
     the trade costs (the job that gives it and the job that gets it both restart) repay over the
     horizon. Without ``held``, replaying the Pollux workloads, a third of all resizes were undone
     within five minutes: a worker traded for a gain smaller than the restarts it cost, then traded
     back.
3. ties: the fewest workers above the minimum (with a model that knows nothing, the even rule), then
   the oldest, then by name.

A job whose target is above its size then grows only if the speedup repays the restart it costs:
``(s(target) / s(size) - 1) * gain_horizon_seconds >= restart_seconds`` (every resize restarts all its
workers); otherwise it keeps its size, and the GPUs it would have taken are divided again among the
other jobs (which may take them, within their own restart rule). GPUs that no other job takes then go
to the jobs held back after all, in the same round: idle GPUs cost nothing, so the restart rule chooses
between jobs and never keeps a job small beside GPUs nobody else uses. A shrink is never held back: the
pool is what elastic jobs may hold, and what waiting work needs comes out of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.elastic.claim import claim_weights
from scheduling.elastic.job import ElasticJob, ElasticSettings
from scheduling.elastic.sizing import divide_pool
from scheduling.elastic.throughput import PRIOR, Throughput


def nodes_for(workers: int, worker_gpus: int, node_gpus: int) -> int:
    """The fewest nodes of ``node_gpus`` GPUs that hold ``workers`` workers of ``worker_gpus`` each."""
    if workers <= 0:
        return 0
    per_node = max(1, node_gpus // max(worker_gpus, 1)) if node_gpus > 0 else workers
    return -(-workers // per_node)


def speedup_at(model: Throughput, job: ElasticJob, workers: int, node_gpus: int) -> float:
    """The job's predicted speedup at ``workers`` laid out compactly."""
    return model.speedup(workers, nodes_for(workers, job.worker.gpus, node_gpus))


def size_by_gain(
    jobs: Sequence[ElasticJob],
    pool_gpus: int,
    deficits: Mapping[str, int],
    *,
    models: Mapping[str, Throughput],
    attained: Mapping[str, float],
    settings: ElasticSettings,
    node_gpus: int,
) -> dict[str, int]:
    """The target number of workers of every job, by job key (see the module docstring).

    Args:
        jobs: the elastic jobs (declarations already checked).
        pool_gpus: the GPUs elastic jobs may hold in all.
        deficits: per queue, its fair share less its allocation, in GPUs.
        models: each job's learned throughput (a job missing: the prior, linear).
        attained: each job's attained service in GPU-seconds (missing: 0).
        settings: ``hysteresis``, the claim weights' (``long_after_seconds``...), ``restart_seconds``,
            ``gain_horizon_seconds``.
        node_gpus: GPUs of the largest node, for the compact spread a size needs.
    """

    def score_of(job: ElasticJob, k: int) -> float:
        model = models.get(job.key, PRIOR)
        now = speedup_at(model, job, k, node_gpus)
        gain = speedup_at(model, job, k + 1, node_gpus) / now - 1.0 if now > 0 else 1.0
        las = weights[job.key]
        holds = k + 1 <= job.size
        keep = 1.0 + settings.hysteresis if holds else 1.0
        score = (gain * keep + (trade_cost if holds else 0.0)) * las / job.worker.gpus
        return round(score, 9)  # rounded: ties are ties on every machine

    weights = claim_weights(jobs, attained, settings)
    trade_cost = 2.0 * settings.restart_seconds / max(settings.gain_horizon_seconds, 1.0)

    capped: dict[str, int] = {}  # jobs whose growth does not repay its restart, held at their size
    while True:
        targets = divide_pool(jobs, pool_gpus, deficits, score_of, {}, capped)
        unpaid = {
            j.key: j.size
            for j in jobs
            if j.key not in capped
            and _repaid(j, targets[j.key], models, settings, node_gpus) < targets[j.key]
        }
        if not unpaid:
            break
        capped.update(unpaid)  # each pass holds at least one more job back: at most len(jobs) passes
    if capped:  # what no other job took would stay idle: the held-back jobs grow into it after all
        targets = divide_pool(jobs, pool_gpus, deficits, score_of, targets, {})
    return targets


def _repaid(
    job: ElasticJob, target: int, models: Mapping[str, Throughput], settings: ElasticSettings, node_gpus: int
) -> int:
    """``target``, or the job's size when growing to it would not repay the restart."""
    if target <= job.size or job.size < job.min_workers or job.running < job.size:
        return target  # a shrink, or a job still starting: it restarts anyway
    model = models.get(job.key, PRIOR)
    now = speedup_at(model, job, job.size, node_gpus)
    then = speedup_at(model, job, target, node_gpus)
    if now > 0 and (then / now - 1.0) * settings.gain_horizon_seconds < settings.restart_seconds:
        return job.size
    return target
