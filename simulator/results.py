"""What a run leaves behind: each job's outcome and, per decision, what the cluster held.

The loop fills these; ``simulator.run_figures`` turns them into the table's figures and ``simulator.plots``
into pictures. Counts the loop can see for itself (starts, resizes, moves, allocations below a job's
minimum) are counted here rather than trusted to a policy, so every policy is measured alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np


@dataclass(frozen=True, slots=True)
class JobResult:
    """One job's outcome; ``jct`` is ``completed - submitted`` in seconds.

    Attributes:
        name: the job's name.
        application: the application (the speed profile), or ``rigid`` for a trace job.
        submitted: arrival time.
        completed: when its last epoch ended.
        restarts: allocation changes after the first start (each one charged the restart penalty).
        queue: the queue it was submitted to.
        gpus: the GPUs it asked for.
        started: the first decision that gave it GPUs.
        resizes: allocation changes to another number of GPUs while it held some.
        moves: allocation changes to other nodes with the same number of GPUs.
        preemptions: times it lost every GPU before it completed.
        partial: decisions that gave it fewer GPUs than the policy's minimum for it (a partial gang).
        compact: it held GPUs on the fewest nodes that can hold them at every decision (``None`` for a
            one-GPU job, where the question does not arise).
        placements: at each (re)allocation, its time and the GPU indices it got per node index; a
            preemption is an entry with no GPUs, so occupancy can be rebuilt from these alone.
        nvlink: every node part of two or more GPUs it was placed on was pairwise NVLink-connected
            wherever the GPUs the other jobs left free held such a set (``None``: no placement where
            such a set existed; ``simulator.gpu_sets``).
    """

    name: str
    application: str
    submitted: int
    completed: int
    restarts: int
    queue: str = "default"
    gpus: int = 0
    started: int = 0
    resizes: int = 0
    moves: int = 0
    preemptions: int = 0
    partial: int = 0
    compact: bool | None = None
    placements: tuple[tuple[int, tuple[tuple[int, tuple[int, ...]], ...]], ...] = ()
    nvlink: bool | None = None

    @property
    def jct(self) -> int:
        """Job completion time: from arrival to the end of its last epoch."""
        return self.completed - self.submitted

    @property
    def queueing_delay(self) -> int:
        """From arrival to the first decision that gave it GPUs."""
        return self.started - self.submitted


@dataclass(frozen=True, slots=True)
class StepRecord:
    """The cluster right after one decision.

    Attributes:
        now: the decision's time.
        allocated: GPUs held by jobs.
        waiting: active jobs that hold no GPU.
        held: GPUs held per queue (queues holding none are left out).
        demand: GPUs asked for per queue by its active jobs (their requested sizes).
    """

    now: int
    allocated: int
    waiting: int
    held: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    demand: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one run, jobs in workload order.

    Attributes:
        mode: the mode's name.
        policy: the policy's name.
        seed: the seed the policy got.
        jobs: every completed job.
        steps: decisions taken.
        capacity: GPUs in the cluster.
        timeline: one record per decision with an active job (empty unless asked for).
        unfinished: jobs that had not completed when the run stopped (``until``), by name.
    """

    mode: str
    policy: str
    seed: int
    jobs: tuple[JobResult, ...]
    steps: int
    capacity: int = 0
    timeline: tuple[StepRecord, ...] = field(default=(), compare=False)
    unfinished: tuple[str, ...] = ()

    @property
    def average_jct(self) -> float:
        """Mean JCT, the figure the Pollux paper compares."""
        return float(np.mean([job.jct for job in self.jobs]))

    def percentile_jct(self, percent: float) -> float:
        """JCT percentile with numpy's default linear interpolation between order statistics."""
        return float(np.percentile([job.jct for job in self.jobs], percent))
