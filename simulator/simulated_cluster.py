"""The simulated cluster in phalanx's own model: the nodes, pods, PodGroups and Queues the core reads.

The phalanx policy decides by asking the core (``scheduling``), which reads ``scheduling.model``
records, never the loop's node indices. This module is the translation both ways: a job of the trace
becomes an MPIJob-like gang of worker pods in one PodGroup, a running worker is a bound pod holding GPU
indices, and a bound pod becomes the node index the loop's allocation names.

How a trace job becomes pods (``JobShape``):

- **elastic** (phalanx's default for Pollux jobs, which may scale): an elastic MPIJob of one-GPU
  workers, at least ``min_workers`` (1) and at most the GPUs the job asked for. Its PodGroup's
  ``minMember`` is its minimum; the placement manager's elastic round grows it from there.
- **rigid, node-shaped**: workers of a whole node's GPUs, the remainder in one smaller worker (a 6-GPU
  job on 4-GPU nodes is 4 + 2): the shape a user who knows the nodes writes, one worker per node.
- **rigid, one GPU per worker**: what a topology-blind submission looks like (the no-topology ablation).

Nodes are ``n00``, ``n01``, ... so that name order is index order; they carry no GPU topology document
(the Pollux nodes are PCIe-only T4s, so every GPU set inside a node is alike) and, for a Philly cluster,
a rack label per ``rack_size`` nodes, which the gang planner's locality rule reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.model import ADMISSION_GATE, Node, Pod, PodGroup, Resources
from scheduling.queues import QUEUE_LABEL

NAMESPACE = "sim"
EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
"""Simulated second 0, for the RFC 3339 creation times the core orders groups by."""
RACK_LABEL = "phalanx.io/rack"


@dataclass(frozen=True, slots=True)
class JobShape:
    """How one job is submitted: its worker pods' GPUs and the fewest it runs with.

    Attributes:
        workers: GPUs of each worker it starts with, by replica index.
        min_workers: its PodGroup's ``minMember``.
        max_workers: the most workers it may run (elastic); equal to ``len(workers)`` when rigid.
    """

    workers: tuple[int, ...]
    min_workers: int
    max_workers: int

    @property
    def elastic(self) -> bool:
        """Whether the elastic round may resize it."""
        return self.max_workers > self.min_workers

    @property
    def initial(self) -> tuple[Worker, ...]:
        """Its workers as submitted: none bound yet."""
        return tuple(Worker(gpus) for gpus in self.workers)


def shape_job(gpus: int, gpus_per_node: int, *, elastic: bool, node_shaped: bool) -> JobShape:
    """The shape a job of ``gpus`` GPUs is submitted in (see the module docstring).

    >>> shape_job(6, 4, elastic=False, node_shaped=True)
    JobShape(workers=(4, 2), min_workers=2, max_workers=2)
    >>> shape_job(3, 4, elastic=False, node_shaped=False)
    JobShape(workers=(1, 1, 1), min_workers=3, max_workers=3)
    >>> shape_job(6, 4, elastic=True, node_shaped=True)
    JobShape(workers=(1,), min_workers=1, max_workers=6)
    """
    if elastic and gpus > 1:
        return JobShape((1,), 1, gpus)
    if not node_shaped or gpus <= gpus_per_node:
        workers = (gpus,) if node_shaped else (1,) * gpus
        return JobShape(workers, len(workers), len(workers))
    full, rest = divmod(gpus, gpus_per_node)
    workers = (gpus_per_node,) * full + ((rest,) if rest else ())
    return JobShape(workers, len(workers), len(workers))


def make_nodes(
    count: int, gpus_per_node: int, *, rack_size: int = 0, sizes: Sequence[int] = ()
) -> tuple[Node, ...]:
    """``count`` alike nodes; with ``rack_size``, the label ``phalanx.io/rack`` per that many nodes.

    ``sizes`` gives each node's GPUs instead (a cluster of unlike nodes, such as openb's).
    """
    width = 2 if count <= 100 else 3 if count <= 1000 else 4
    nodes = []
    for i in range(count):
        labels = {RACK_LABEL: f"r{i // rack_size:0{width}d}"} if rack_size else {}
        nodes.append(
            Node(
                f"n{i:0{width}d}",
                Resources(milli_cpu=1_000_000, memory=2**40, gpus=sizes[i] if sizes else gpus_per_node),
                labels=MappingProxyType(labels),
            )
        )
    return tuple(nodes)


def created_at(seconds: int) -> str:
    """RFC 3339 text of simulated second ``seconds`` (sorts as the seconds do)."""
    return (EPOCH + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Worker:
    """One worker of a job: its GPUs, and where it runs (``None``: waiting)."""

    gpus: int
    node: str | None = None
    indices: tuple[int, ...] = ()
    started: int = 0


def worker_pod(job: str, index: int, worker: Worker, *, queue: str, submitted: int) -> Pod:
    """The pod of ``job``'s worker ``index``: bound and running, or waiting behind the admission gate."""
    labels = MappingProxyType({QUEUE_LABEL: queue}) if queue != "default" else MappingProxyType({})
    bound = worker.node is not None
    return Pod(
        uid=f"uid-{job}-{index}",
        namespace=NAMESPACE,
        name=f"{job}-w{index:03d}",
        requests=Resources(gpus=worker.gpus),
        node_name=worker.node,
        gpu_indices=worker.indices if bound else None,
        phase="Running" if bound else "Pending",
        scheduler_name="phalanx",
        labels=labels,
        created=created_at(submitted),
        group=job,
        started_at=float(worker.started) if bound else None,
        gates=() if bound else (ADMISSION_GATE,),
    )


def job_pods(job: str, workers: Sequence[Worker], *, queue: str, submitted: int) -> list[Pod]:
    """Every worker pod of ``job``, by replica index."""
    return [worker_pod(job, i, w, queue=queue, submitted=submitted) for i, w in enumerate(workers)]


def job_group(job: str, min_workers: int) -> PodGroup:
    """The job's PodGroup: ``minMember`` is its minimum."""
    return PodGroup(NAMESPACE, job, min_workers, uid=f"uid-pg-{job}")


def job_of(pod_key: str) -> tuple[str, int]:
    """(job, replica index) of a worker pod's ``namespace/name``.

    >>> job_of("sim/cifar10-3-w002")
    ('cifar10-3', 2)
    """
    name = pod_key.partition("/")[2]
    job, _, index = name.rpartition("-w")
    return job, int(index)


def allocation_of(workers: Iterable[Worker], index_of: Mapping[str, int]) -> tuple[int, ...]:
    """The loop's allocation: each GPU's node index, grouped by node in index order."""
    nodes = sorted(index_of[w.node] for w in workers if w.node is not None for _ in range(w.gpus))
    return tuple(nodes)
