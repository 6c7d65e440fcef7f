"""An analytic speed model for NVLink topologies: a job slows with the bottleneck bandwidth of its GPUs.

A data-parallel step is compute plus a gradient all-reduce, and a ring all-reduce runs at the speed of
its weakest link (nccl-tests ``doc/PERFORMANCE.md``: bus bandwidth "should reflect the speed of the
hardware bottleneck: NVLink, PCI, QPI, or network"; docs/design/nvlink-topology.md §4.5). The bottleneck of a
job's GPUs is, as docs/design/nvlink-topology.md §5.2 recommends, the smallest of

- the bandwidth each node part sustains (``scheduling.topology.set_score``: the core's min-cut over the
  node's NVLink / PCIe / socket graph, NCCL's link capacities), for parts of two or more GPUs, and
- the network between nodes (``network_mbs``), when the job spans more than one node.

With ``f`` the share of a step spent communicating at bandwidth ``measured_mbs``, and communication
time inversely proportional to bandwidth (no overlap with compute, the conservative case), a step at
bottleneck ``B`` takes ``(1 - f) + f * measured_mbs / B`` of the measured step. A job runs at the ratio
of that time on the best GPUs of the same part sizes on the same nodes (what the core would pick on
idle nodes) to that time on the GPUs it holds: 1 on the best sets, less on worse ones.

This multiplies the wrapped rigid model's rate (``simulator.philly.RigidSpeed``), which keeps its
charge per node spanned beyond the fewest: that charge prices *how many* nodes, this factor prices
*which GPUs* inside them, and includes the network only as a cap (NVLink inside a node buys nothing
beyond a slower network).

**Default fraction, 0.13, measured**: the Pollux artifact's profiles (``data/pollux/*/placements.csv``,
Apache-2.0, measured on 4 x T4 PCIe Gen3 nodes) record ``sync_time`` and ``step_time`` per placement; on
one 4-GPU node (placement ``4``) the median share of a step spent in gradient synchronisation is bert
0.125, cifar10 0.086, deepspeech2 0.082, imagenet 0.015, ncf 0.365, yolov3 0.111: mean 0.13. The
bandwidth it was measured at, ``measured_mbs``, is NCCL's PCIe Gen3 x16 figure, 12,000 MB/s. Faster
GPUs than T4s spend a larger share communicating, so this default understates what topology buys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from scheduling.topology import NodeTopology, TopologyCache, best_gpu_set, set_score
from simulator.gpu_sets import GpuSets
from simulator.philly import advance_at
from simulator.speed import Advance, Placement, Progress
from simulator.traces import TraceJob

DEFAULT_COMM_FRACTION = 0.13
"""Share of a step spent in all-reduce at ``DEFAULT_MEASURED_MBS`` (module docstring)."""

DEFAULT_MEASURED_MBS = 12_000
"""NCCL's PCIe Gen3 x16 bandwidth (``PCI_BW``), the T4 nodes' link the fraction was measured on."""


class RatedSpeed(Protocol):
    """A speed model with a constant rate per placement (``RigidSpeed``)."""

    def check(self, job: TraceJob) -> None:
        """Raise now if the job can never be simulated."""
        ...

    def rate(self, job: TraceJob, placement: Placement) -> float:
        """Work seconds per second on ``placement``."""
        ...

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        """Work left."""
        ...


@dataclass(frozen=True)
class LinkSpeed:
    """``inner``'s rate times the link factor of the GPUs a job holds (module docstring).

    Attributes:
        inner: the rigid model whose rate is scaled.
        topologies: each node's prepared topology by node index (``None``: no document; its parts count
            as ideal, since nothing is known of them).
        network_mbs: MB/s per direction between nodes.
        comm_fraction: share of a step spent communicating at ``measured_mbs``.
        measured_mbs: the bandwidth ``comm_fraction`` was measured at.
    """

    inner: RatedSpeed
    topologies: tuple[NodeTopology | None, ...]
    network_mbs: int
    comm_fraction: float = DEFAULT_COMM_FRACTION
    measured_mbs: int = DEFAULT_MEASURED_MBS
    cache: TopologyCache = field(default_factory=TopologyCache, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.comm_fraction <= 1.0:
            msg = f"the communication fraction must be within 0..1, got {self.comm_fraction}"
            raise ValueError(msg)
        if self.network_mbs < 1 or self.measured_mbs < 1:
            msg = "bandwidths must be positive"
            raise ValueError(msg)

    def check(self, job: TraceJob) -> None:
        """Whatever the inner model accepts."""
        self.inner.check(job)

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        """The inner model's."""
        return self.inner.remaining_work(job, progress)

    def advance(self, job: TraceJob, progress: Progress, placement: Placement, seconds: int) -> Advance:
        """Without GPU indices: the inner model's rate (the best sets assumed)."""
        return advance_at(job, progress, self.inner.rate(job, placement), seconds)

    def advance_on(
        self, job: TraceJob, progress: Progress, placement: Placement, sets: GpuSets, seconds: int
    ) -> Advance:
        """Train on the GPU indices ``sets``."""
        rate = self.inner.rate(job, placement) * self.factor(sets)
        return advance_at(job, progress, rate, seconds)

    def factor(self, sets: GpuSets) -> float:
        """Step time on the best sets of the same sizes over step time on ``sets`` (1 at best)."""
        held, best = self.bottlenecks(sets)
        if held is None or best is None:
            return 1.0
        return self._time(best) / self._time(held)

    def bottlenecks(self, sets: GpuSets) -> tuple[int | None, int | None]:
        """MB/s of the weakest link of ``sets`` and of the best sets of its part sizes (``None``: none)."""
        held: list[int] = []
        best: list[int] = []
        for node, gpus in sets:
            topology = self.topologies[node] if node < len(self.topologies) else None
            if topology is None or len(gpus) < 2:
                continue
            held.append(set_score(topology, gpus, cache=self.cache))
            choice = best_gpu_set(topology, frozenset(range(topology.gpu_count)), len(gpus), cache=self.cache)
            best.append(choice.score if choice is not None else held[-1])
        if len(sets) > 1:
            held.append(self.network_mbs)
            best.append(self.network_mbs)
        return (min(held), min(best)) if held else (None, None)

    def _time(self, mbs: int) -> float:
        return (1.0 - self.comm_fraction) + self.comm_fraction * self.measured_mbs / mbs
