"""One job's record as the loop runs it, and how a step, a decision and a placement change it.

``JobTrack`` is the loop's own bookkeeping (progress, allocation, restart penalty left, the counts the
results report); each function returns a new record, so a step is a map over the live jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from simulator.gpu_sets import GpuSets, SpeedOnSets
from simulator.results import JobResult, StepRecord
from simulator.speed import Placement, Progress, SpeedModel
from simulator.traces import TraceJob

Allocation = tuple[int, ...]
"""The node index of each GPU a job holds, in the order the policy gave them: (3, 3, 3, 3, 5, 5)."""


@dataclass(frozen=True, slots=True)
class JobTrack:
    """One job of the trace: its spec, its training progress and what happened to it so far."""

    spec: TraceJob
    progress: Progress = field(default_factory=Progress)
    allocation: Allocation = ()
    penalty_left: int = 0
    attained_gpu_seconds: int = 0
    completed: int | None = None
    restarts: int = -1
    started: int | None = None
    resizes: int = 0
    moves: int = 0
    preemptions: int = 0
    partial: int = 0
    compact: bool | None = None
    gpus: GpuSets = ()
    placements: tuple[tuple[int, GpuSets], ...] = ()
    nvlink: bool | None = None
    rate: float = 0.0
    """Samples per second it trained at in the last step (0: it did not train), as its launcher reports."""


def result_of(job: JobTrack) -> JobResult:
    """What the run reports of ``job``."""
    spec = job.spec
    return JobResult(
        spec.name,
        spec.application,
        spec.time,
        job.completed if job.completed is not None else -1,
        max(job.restarts, 0),
        queue=spec.queue,
        gpus=spec.num_replicas,
        started=job.started if job.started is not None else spec.time,
        resizes=job.resizes,
        moves=job.moves,
        preemptions=job.preemptions,
        partial=job.partial,
        compact=job.compact,
        placements=job.placements,
        nvlink=job.nvlink,
    )


def step_record(now: int, active: Sequence[JobTrack]) -> StepRecord:
    """The GPUs each queue holds and asks for at the decision at ``now``."""
    held: dict[str, int] = {}
    demand: dict[str, int] = {}
    for job in active:
        queue = job.spec.queue
        demand[queue] = demand.get(queue, 0) + job.spec.num_replicas
        if job.allocation:
            held[queue] = held.get(queue, 0) + len(job.allocation)
    return StepRecord(
        now,
        sum(held.values()),
        sum(1 for job in active if not job.allocation),
        dict(sorted(held.items())),
        dict(sorted(demand.items())),
    )


def placement_of(allocation: Allocation) -> Placement:
    """GPUs per node in allocation order: consecutive equal node indices form one node's share."""
    counts: list[int] = []
    for i, node in enumerate(allocation):
        if i > 0 and node == allocation[i - 1]:
            counts[-1] += 1
        else:
            counts.append(1)
    return tuple(counts)


def train(job: JobTrack, speed: SpeedModel, now: int, seconds: int, on_sets: SpeedOnSets | None) -> JobTrack:
    """``job`` after ``seconds`` of training from ``now``: the restart penalty first, then progress."""
    if job.completed is not None or not job.allocation:
        return replace(job, rate=0.0) if job.rate else job
    gpus = len(job.allocation)
    pause = min(job.penalty_left, seconds)
    left = seconds - pause
    progress, finished, rate = job.progress, None, 0.0
    if left > 0:
        placement = placement_of(job.allocation)
        step = (
            on_sets.advance_on(job.spec, job.progress, placement, job.gpus, left)
            if on_sets is not None and job.gpus
            else speed.advance(job.spec, job.progress, placement, left)
        )
        progress, finished, rate = step.progress, step.finished_after, step.samples_per_second
    used = left if finished is None else finished
    return replace(
        job,
        progress=progress,
        rate=rate,
        penalty_left=job.penalty_left - pause,
        attained_gpu_seconds=job.attained_gpu_seconds + (pause + used) * gpus,
        completed=None if finished is None else now + pause + finished,
    )


def reallocate(
    job: JobTrack,
    allocation: Allocation,
    fewest_nodes: Callable[[int], int],
    penalty: int,
    now: int,
    minimum: int,
) -> JobTrack:
    """``job`` after a decision gave it ``allocation``: a change restarts it (``penalty`` seconds).

    ``fewest_nodes`` (``Mode.fewest_nodes``) says whether the allocation is compact; ``minimum`` below
    which a gang counts as partial.
    """
    if job.completed is not None:
        return job
    partial = job.partial + (0 < len(allocation) < minimum)
    compact = job.compact
    if allocation and job.spec.num_replicas > 1:
        fewest = fewest_nodes(len(allocation))
        compact = (compact is not False) and len(set(allocation)) <= fewest
    if allocation == job.allocation:
        unchanged = partial == job.partial and compact == job.compact
        return job if unchanged else replace(job, partial=partial, compact=compact)
    if not allocation:
        return replace(job, allocation=(), preemptions=job.preemptions + 1, partial=partial)
    resized = bool(job.allocation) and len(allocation) != len(job.allocation)
    moved = bool(job.allocation) and not resized
    return replace(
        job,
        allocation=allocation,
        penalty_left=penalty,
        restarts=job.restarts + 1,
        started=now if job.started is None else job.started,
        resizes=job.resizes + resized,
        moves=job.moves + moved,
        partial=partial,
        compact=compact,
    )


def place(job: JobTrack, placed: tuple[GpuSets, bool | None] | None, now: int) -> JobTrack:
    """Record the job's GPU indices after a decision, and the NVLink verdict of a new placement."""
    if job.completed is not None:
        return job
    if placed is None:  # it lost its GPUs (a preemption): the record shows the release
        return replace(job, gpus=(), placements=(*job.placements, (now, ()))) if job.gpus else job
    sets, verdict = placed
    if sets == job.gpus:
        return job
    nvlink = job.nvlink if verdict is None else verdict and job.nvlink is not False
    return replace(job, gpus=sets, placements=(*job.placements, (now, sets)), nvlink=nvlink)
