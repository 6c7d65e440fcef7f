"""What an elastic job is to the planner, and the checks its declaration must pass.

An MPIJob is elastic when it declares a range of workers: its minimum from
``runPolicy.schedulingPolicy.minAvailable`` (launcher included, as the MPI Operator counts it) and its
maximum from the annotation ``phalanx.io/max-workers`` (the MPIJob API has no field for it; Horovod's
``--max-np`` must match). The adapter reads those into an ``ElasticJob``; ``check_job`` refuses a
declaration that cannot be honoured, with a sentence for the job's event, and the planner leaves such
a job alone; it caps a maximum the cluster could never hold, with a sentence too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from scheduling.elastic.operator_lag import OperatorCount
from scheduling.model import GPU_RESOURCE, Pod, Resources

MAX_WORKERS_ANNOTATION = "phalanx.io/max-workers"
"""MPIJob annotation: the most workers an elastic job may run."""

MAX_ELASTIC_WORKERS = 1024
"""The most workers phalanx grows one elastic job to, whatever its annotation says: each is a pod, and
a job of more than a thousand workers is sized by hand, not by a pass every two seconds."""


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
        capped: why ``max_workers`` is below the job's annotation (``WorkerRange.capped``), if it is.
        operator: its running workers as its operator recorded them and as they are
            (``scheduling.elastic.operator_lag``); ``None``: not known, as in the simulator.
    """

    key: str
    queue: str
    min_workers: int
    max_workers: int
    worker: Resources
    workers: tuple[Pod, ...] = ()
    created: str = ""
    replicas: int | None = None
    capped: str | None = None
    operator: OperatorCount | None = None

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
        grow_step: workers one job grows by in one round at most (``None``: no bound). Each new worker
            is a pod its operator creates and kube-scheduler places; a job that may grow by hundreds
            grows by this many a round (every 2 s by default), so the API server, the operator and
            the scheduler are never handed hundreds of pods in one go. Shrinking is not bounded: it
            gives GPUs back to waiting work and creates nothing.
        sizing: how the pool is divided above the minimums: ``"goodput"`` (``scheduling.elastic.gain``:
            the next worker to the job it speeds up most, least attained service first) or ``"even"``
            (``scheduling.elastic.sizing``: evenly, the rule before the throughput model, kept for
            comparison).
        hysteresis: a worker a job holds counts this much more than one it would gain (``"goodput"``);
            it also counts the two restarts a trade costs (``2 * restart_seconds`` over
            ``gain_horizon_seconds``), so a worker moves between jobs only for a gain that repays them.
        las_seconds: attained GPU-seconds at which the claim of a job not long yet halves (with
            ``las_power`` 1); ``None``: attained service does not weigh among such jobs. Ten GPU-hours:
            of 3,600, 10,800, 36,000 and 100,000, the lowest average JCT over the Pollux workloads 1-4
            (``docs/results/simulator``).
        las_power: how steeply attained service lowers such a job's claim.
        long_after_seconds: attained GPU-seconds after which a job is *long*: its claim counts
            ``long_weight``, and long jobs are served oldest first (``scheduling.elastic.claim``);
            ``None``: no job is long. Twenty GPU-hours (``docs/results/simulator`` has the sweep).
        long_weight: a long job's claim against a job that has attained nothing.
        long_order: each long job's claim against the claim of the long job older than it.
        restart_seconds: what one resize costs the job: every worker restarts from its checkpoint.
        gain_horizon_seconds: how long a growth is expected to pay off; a growth whose speedup over this
            long does not repay ``restart_seconds`` is not made while another job would use the GPUs.
        hold_seconds: how long at most a job resized for waiting work keeps that size while the work
            still waits (``scheduling.elastic.size_hold``).
    """

    moves_per_job: int = 1
    moves_per_round: int = 4
    cooldown_seconds: float = 60.0
    grow_step: int | None = 32
    sizing: Literal["goodput", "even"] = "goodput"
    hysteresis: float = 0.3
    las_seconds: float | None = 36000.0
    las_power: float = 1.0
    long_after_seconds: float | None = 72000.0
    long_weight: float = 0.1
    long_order: float = 0.3
    restart_seconds: float = 30.0
    gain_horizon_seconds: float = 600.0
    hold_seconds: float = 60.0


@dataclass(frozen=True, slots=True)
class WorkerRange:
    """What an elastic declaration allows, once checked.

    Attributes:
        low: the fewest workers (``minAvailable`` less the launcher).
        high: the most workers phalanx grows the job to: the annotation's value, capped.
        capped: why ``high`` is below the annotation's value (the cluster cannot hold that many, or the
            limit ``MAX_ELASTIC_WORKERS``), for an event on the job; ``None`` when it is not.
    """

    low: int
    high: int
    capped: str | None = None


def _shown(value: object) -> str:
    """``value`` for a message: its repr, cut short (an annotation may be 256 KiB of digits)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:32]}... ({len(text)} characters)"


def check_job(
    key: str, min_available: object, max_workers: object, gpus_in_cluster: int, worker_gpus: int
) -> WorkerRange:
    """The range of workers of a declaration, or ``JobError`` saying what is wrong.

    The annotation is read strictly (1 to 9 ASCII digits: ``"²"`` or 5,000 digits are refused, not
    handed to ``int``), a job whose workers ask for no GPU is refused (sizing grows jobs into free
    GPUs: a worker that needs none would grow without bound), and the maximum is capped by what the
    cluster could ever hold (its GPUs over a worker's) and by ``MAX_ELASTIC_WORKERS``.

    Args:
        key: the MPIJob, for the message.
        min_available: ``schedulingPolicy.minAvailable`` (launcher included), or ``None``.
        max_workers: the ``phalanx.io/max-workers`` annotation's text, or ``None`` (not elastic).
        gpus_in_cluster: every GPU the cluster has, to refuse a minimum it can never hold.
        worker_gpus: GPUs of one worker.

    >>> check_job("ml/j", 3, "6", 32, 2)
    WorkerRange(low=2, high=6, capped=None)
    >>> check_job("ml/j", 3, "100", 32, 2).high
    16
    >>> try:
    ...     check_job("ml/j", 5, "3", 32, 2)
    ... except JobError as exc:
    ...     print(exc)
    MPIJob ml/j: min workers 4 (minAvailable 5 less the launcher) is above max workers 3
    """
    if isinstance(min_available, bool) or not isinstance(min_available, int) or min_available < 2:
        msg = (
            f"MPIJob {key}: an elastic job needs schedulingPolicy.minAvailable of at least 2 "
            f"(launcher and one worker), got {_shown(min_available)}"
        )
        raise JobError(msg)
    text = max_workers.strip() if isinstance(max_workers, str) else ""
    if not (0 < len(text) <= 9 and text.isascii() and text.isdigit()):
        msg = (
            f"MPIJob {key}: annotation {MAX_WORKERS_ANNOTATION} must be a whole number of at most 9 "
            f"digits, got {_shown(max_workers)}"
        )
        raise JobError(msg)
    if worker_gpus <= 0:
        msg = (
            f"MPIJob {key}: its workers ask for no {GPU_RESOURCE}; phalanx grows elastic jobs into free "
            "GPUs only, so it does not size this job (it keeps the workers it declares)"
        )
        raise JobError(msg)
    low, declared = min_available - 1, int(text)
    if low > declared:
        msg = (
            f"MPIJob {key}: min workers {low} (minAvailable {min_available} less the launcher) "
            f"is above max workers {declared}"
        )
        raise JobError(msg)
    if low * worker_gpus > gpus_in_cluster:
        msg = (
            f"MPIJob {key}: its minimum of {low} workers x {worker_gpus} GPUs is more than "
            f"the cluster's {gpus_in_cluster} GPUs"
        )
        raise JobError(msg)
    if low > MAX_ELASTIC_WORKERS:
        msg = f"MPIJob {key}: min workers {low} is above phalanx's limit of {MAX_ELASTIC_WORKERS} workers"
        raise JobError(msg)
    fit = gpus_in_cluster // worker_gpus
    high = min(declared, fit, MAX_ELASTIC_WORKERS)
    if high == declared:
        return WorkerRange(low, high)
    why = (
        f"the cluster's {gpus_in_cluster} GPUs hold at most {fit} workers of {worker_gpus} GPUs"
        if fit <= MAX_ELASTIC_WORKERS
        else f"phalanx grows an elastic job to at most {MAX_ELASTIC_WORKERS} workers"
    )
    return WorkerRange(low, high, f"MPIJob {key}: max workers {declared} capped to {high}: {why}")
