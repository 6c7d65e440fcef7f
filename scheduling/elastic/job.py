"""What an elastic job is to the planner, and the checks its declaration must pass.

An MPIJob is elastic when it declares a range of workers: its minimum from
``runPolicy.schedulingPolicy.minAvailable`` (launcher included, as the MPI Operator counts it) and its
maximum from the annotation ``phalanx.io/max-workers`` (the MPIJob API has no field for it; Horovod's
``--max-np`` must match). The adapter reads those into an ``ElasticJob``; ``check_job`` refuses a
declaration that cannot be honoured, with a sentence for the job's event, and the planner leaves such
a job alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduling.model import Pod, Resources

MAX_WORKERS_ANNOTATION = "phalanx.io/max-workers"
"""MPIJob annotation: the most workers an elastic job may run."""


class JobError(ValueError):
    """An elastic declaration that cannot be honoured; the message goes on the MPIJob's event."""


@dataclass(frozen=True, slots=True)
class ElasticJob:
    """One elastic MPIJob as the planner sees it.

    Attributes:
        key: the MPIJob's ``namespace/name``.
        queue: its leaf queue.
        min_workers: the fewest workers it runs with (``minAvailable`` less the launcher).
        max_workers: the most workers it may use.
        worker: what one worker requests.
        workers: its live worker pods, by replica index (the operator removes the highest first).
        created: the MPIJob's creation time (RFC 3339), the tie-break between equal claims.
        replicas: ``Worker.replicas`` as declared, the size its operator is bringing it to (workers may
            still be on their way); ``None``: as many as ``workers``.
    """

    key: str
    queue: str
    min_workers: int
    max_workers: int
    worker: Resources
    workers: tuple[Pod, ...] = ()
    created: str = ""
    replicas: int | None = None

    @property
    def size(self) -> int:
        """How many workers it has now: as declared, whether or not its operator created them all yet.

        Counting only the pods would see a job whose operator is still creating workers as smaller than
        it is: a "resize" to the declared size, or a shrink told as a growth.
        """
        return len(self.workers) if self.replicas is None else self.replicas

    def running_on(self) -> Mapping[str, int]:
        """Running workers per node, by node name."""
        counts: dict[str, int] = {}
        for pod in self.workers:
            if pod.holds_resources and not pod.terminating and pod.node_name is not None:
                counts[pod.node_name] = counts.get(pod.node_name, 0) + 1
        return dict(sorted(counts.items()))

    @property
    def running(self) -> int:
        """How many of its workers run now."""
        return sum(self.running_on().values())


@dataclass(frozen=True, slots=True)
class ElasticSettings:
    """The planner's guards.

    Attributes:
        moves_per_job: workers of one job moved in one round at most.
        moves_per_round: workers moved in the whole cluster in one round at most.
        cooldown_seconds: a job moved less than this long ago is not moved again.
    """

    moves_per_job: int = 1
    moves_per_round: int = 4
    cooldown_seconds: float = 60.0


def check_job(
    key: str, min_available: object, max_workers: object, gpus_in_cluster: int, worker_gpus: int
) -> tuple[int, int]:
    """The (min, max) workers of a declaration, or ``JobError`` saying what is wrong.

    Args:
        key: the MPIJob, for the message.
        min_available: ``schedulingPolicy.minAvailable`` (launcher included), or ``None``.
        max_workers: the ``phalanx.io/max-workers`` annotation's text, or ``None`` (not elastic).
        gpus_in_cluster: every GPU the cluster has, to refuse a minimum it can never hold.
        worker_gpus: GPUs of one worker.

    >>> check_job("ml/j", 3, "6", 32, 2)
    (2, 6)
    >>> try:
    ...     check_job("ml/j", 5, "3", 32, 2)
    ... except JobError as exc:
    ...     print(exc)
    MPIJob ml/j: min workers 4 (minAvailable 5 less the launcher) is above max workers 3
    """
    if isinstance(min_available, bool) or not isinstance(min_available, int) or min_available < 2:
        msg = (
            f"MPIJob {key}: an elastic job needs schedulingPolicy.minAvailable of at least 2 "
            f"(launcher and one worker), got {min_available!r}"
        )
        raise JobError(msg)
    if not isinstance(max_workers, str) or not max_workers.strip().isdigit():
        msg = f"MPIJob {key}: annotation {MAX_WORKERS_ANNOTATION} must be a whole number, got {max_workers!r}"
        raise JobError(msg)
    low, high = min_available - 1, int(max_workers)
    if low > high:
        msg = (
            f"MPIJob {key}: min workers {low} (minAvailable {min_available} less the launcher) "
            f"is above max workers {high}"
        )
        raise JobError(msg)
    if low * worker_gpus > gpus_in_cluster:
        msg = (
            f"MPIJob {key}: its minimum of {low} workers x {worker_gpus} GPUs is more than "
            f"the cluster's {gpus_in_cluster} GPUs"
        )
        raise JobError(msg)
    return low, high
