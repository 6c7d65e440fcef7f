"""A window of the Philly job log as a workload: each virtual cluster a queue, rigid jobs, a penalty model.

- **Jobs**: those submitted in ``[start, start + hours)``, in submission order (file order on ties),
  with times in seconds from ``start``; each keeps its GPU count and recorded duration, and its
  ``cluster`` (the hashed virtual cluster) is its queue.
- **Queues**: one per virtual cluster of the window, its GPU quota its node count in
  ``philly_vc_nodes_helios.csv`` (or a given ``vc,node num`` file) times the GPUs per node times
  ``scale``, over-quota weight 1. A virtual cluster the file does not list gets quota 0 (it only
  borrows). The simulated cluster has as many nodes as the quotas of the window's queues add up to
  (at least one), so that the quotas are exactly what the cluster can guarantee.
- **Speed** (``RigidSpeed``): a job's work is its recorded duration at its requested GPUs on the fewest
  nodes that hold them. Every node it spans beyond that slows it by ``penalty_per_node`` (default 20 %),
  an assumption within the range Tiresias measured (Gu et al., NSDI'19, section 2.3: from about 1x for
  ResNet-like models to about 2x for VGG-like ones when spread over machines); fewer GPUs than requested
  slow it in proportion.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduling.queues import Queue, ResourceQuota
from simulator.speed import Advance, Placement, Progress
from simulator.traces import PhillyJob, TraceJob, WorkloadError

RIGID = "rigid"


def read_vc_nodes(path: Path) -> dict[str, int]:
    """``vc,node num`` rows: nodes per virtual cluster.

    Raises:
        WorkloadError: a missing column or a node count that is not a whole number.
    """
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        out = {}
        for line, row in enumerate(reader, start=2):
            try:
                out[row["vc"].strip()] = int(row["node num"])
            except (KeyError, ValueError):
                raise WorkloadError(path, line, "node num", f"not a node count: {row}") from None
        return out


def window(jobs: Sequence[PhillyJob], start: dt.datetime, hours: float) -> tuple[TraceJob, ...]:
    """The jobs submitted in the window, as rigid trace jobs (see the module docstring)."""
    end = start + dt.timedelta(hours=hours)
    chosen = sorted(
        ((job.timestamp, i, job) for i, job in enumerate(jobs) if start <= job.timestamp < end),
        key=lambda t: (t[0], t[1]),
    )
    return tuple(
        TraceJob(
            name=f"{job.cluster}-{n}",
            time=int((when - start).total_seconds()),
            application=RIGID,
            num_replicas=job.num_gpus,
            batch_size=1,
            queue=job.cluster,
            duration=max(job.duration, 1),
        )
        for n, (when, _, job) in enumerate(chosen)
    )


@dataclass(frozen=True, slots=True)
class PhillySetup:
    """The queues and the cluster size of a window."""

    queues: tuple[Queue, ...]
    nodes: int


def setup(
    jobs: Sequence[TraceJob], vc_nodes: Mapping[str, int], *, gpus_per_node: int, scale: float
) -> PhillySetup:
    """Queues for the window's virtual clusters and a cluster exactly as large as their quotas."""
    names = sorted({job.queue for job in jobs})
    nodes = {name: round(vc_nodes.get(name, 0) * scale) for name in names}
    queues = tuple(
        Queue(name, gpu=ResourceQuota(quota=nodes[name] * gpus_per_node, over_quota_weight=1))
        for name in names
    )
    return PhillySetup(queues, max(1, sum(nodes.values())))


@dataclass(frozen=True, slots=True)
class RigidSpeed:
    """Recorded duration at the requested size, slowed per node spanned beyond the fewest."""

    gpus_per_node: int
    penalty_per_node: float = 0.2

    def check(self, job: TraceJob) -> None:
        """Every rigid job can be simulated."""

    def rate(self, job: TraceJob, placement: Placement) -> float:
        """Work seconds per second on ``placement``.

        >>> speed = RigidSpeed(8)
        >>> job = TraceJob("j", 0, "rigid", 8, 1, duration=100)
        >>> speed.rate(job, (8,)), speed.rate(job, (4, 4)), speed.rate(job, (4,))
        (1.0, 0.8333333333333334, 0.5)
        """
        gpus = sum(placement)
        fewest = math.ceil(gpus / self.gpus_per_node)
        slowdown = 1 + self.penalty_per_node * (len(placement) - fewest)
        return min(1.0, gpus / job.num_replicas) / slowdown

    def advance(self, job: TraceJob, progress: Progress, placement: Placement, seconds: int) -> Advance:
        """Train for ``seconds``; finishing is rounded up to a whole second."""
        return advance_at(job, progress, self.rate(job, placement), seconds)

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        """Seconds of work left at the ideal placement."""
        return job.duration - progress.work


def advance_at(job: TraceJob, progress: Progress, rate: float, seconds: int) -> Advance:
    """Train a rigid job at ``rate`` work seconds per second for ``seconds``; the end rounds up."""
    left = job.duration - progress.work
    if left <= rate * seconds + 1e-9:
        return Advance(Progress(1, float(job.duration)), max(1, math.ceil(left / rate - 1e-9)), rate)
    return Advance(Progress(0, progress.work + rate * seconds), None, rate)
