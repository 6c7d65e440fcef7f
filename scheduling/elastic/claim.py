"""How much each elastic job's claim on the next worker counts: least attained service, in two levels.

Attained service (GPU-seconds a job has run) is the only size estimate a scheduler has: a job that has
run long is likely to run long yet (Tiresias's lesson). So:

- a job's claim falls as it runs, ``(1 + attained / las_seconds) ** -las_power`` (halved at ten
  GPU-hours): new jobs go first;
- once it has attained ``long_after_seconds`` (twenty GPU-hours) a job is *long*: its claim counts
  ``long_weight`` (0.1), and the long jobs are served **oldest first**, each counting ``long_order``
  (0.3) times the one older than it. Among jobs of like size, serving one after another finishes them
  sooner on average than sharing the GPUs among all of them, which is what the falling weight alone
  did to them: every long job's claim kept falling as it ran, so the long jobs took turns and all
  finished late. Tiresias does the same: two queues, and first come, first served in the lower one.

Replaying the Pollux workloads 1-4, the second level lowered the average JCT on workloads 1 and 4 by
3-6% and left 2 and 3 as they were, the waits too (``docs/results/simulator/README.md`` has the
threshold's sweep and which jobs moved). The weights are a function of the jobs and their attained
service alone, so the placement manager's events and the decision read the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.elastic.job import ElasticJob, ElasticSettings


def claim_weights(
    jobs: Sequence[ElasticJob], attained: Mapping[str, float], settings: ElasticSettings
) -> dict[str, float]:
    """Each job's weight on its claims, by key (see the module docstring).

    >>> from scheduling.model import Resources
    >>> jobs = [ElasticJob(k, "q", 1, 4, Resources(gpus=1), created=c) for k, c in (("a", "1"), ("b", "2"))]
    >>> claim_weights(jobs, {"a": 90_000.0, "b": 36_000.0}, ElasticSettings())
    {'a': 0.1, 'b': 0.5}
    >>> claim_weights(jobs, {"a": 90_000.0, "b": 100_000.0}, ElasticSettings())
    {'a': 0.1, 'b': 0.03}
    """
    weights = {job.key: _falling(attained.get(job.key, 0.0), settings) for job in jobs}
    for rank, job in enumerate(_long_jobs(jobs, attained, settings)):
        weights[job.key] = _long_weight(rank, settings)
    return weights


def _long_weight(rank: int, settings: ElasticSettings) -> float:
    """The weight of the long job ``rank`` places from the oldest."""
    return round(settings.long_weight * settings.long_order**rank, 9)


def _falling(attained_gpu_seconds: float, settings: ElasticSettings) -> float:
    if settings.las_seconds is None:
        return 1.0
    base = 1.0 + max(attained_gpu_seconds, 0.0) / settings.las_seconds
    return round(float(base**-settings.las_power), 9)


def describe_claim(
    key: str, jobs: Sequence[ElasticJob], attained: Mapping[str, float], settings: ElasticSettings
) -> str:
    """The job's attained service in words, with what it does to its claim, for a resize's event.

    >>> from scheduling.model import Resources
    >>> job = ElasticJob("ml/a", "q", 1, 4, Resources(gpus=1), created="1")
    >>> describe_claim("ml/a", [job], {"ml/a": 45_000.0}, ElasticSettings())
    'attained service 12.5 GPU-hours: its claim on more workers counts 0.44x'
    >>> describe_claim("ml/a", [job], {"ml/a": 90_000.0}, ElasticSettings()).split(": ", 1)[1]
    'a long job (20 GPU-hours or more), the oldest of 1: its claim on more workers counts 0.10x'
    """
    served = max(attained.get(key, 0.0), 0.0)
    said = f"attained service {served / 3600:.1f} GPU-hours"
    threshold = settings.long_after_seconds
    if threshold is None or served < threshold:
        if settings.las_seconds is None:
            return said
        return f"{said}: its claim on more workers counts {_falling(served, settings):.2f}x"
    long = _long_jobs(jobs, attained, settings)
    rank = next((i for i, j in enumerate(long) if j.key == key), 0)
    weight = _long_weight(rank, settings)
    place = "the oldest" if rank == 0 else f"number {rank + 1} by age"
    return (
        f"{said}: a long job ({threshold / 3600:g} GPU-hours or more), {place} of {len(long)}: "
        f"its claim on more workers counts {weight:.2f}x"
    )


def _long_jobs(
    jobs: Sequence[ElasticJob], attained: Mapping[str, float], settings: ElasticSettings
) -> list[ElasticJob]:
    """The long jobs, oldest first (ties by key)."""
    threshold = settings.long_after_seconds
    if threshold is None:
        return []
    return sorted(
        (j for j in jobs if attained.get(j.key, 0.0) >= threshold), key=lambda j: (j.created, j.key)
    )
