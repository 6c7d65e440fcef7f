"""The Alibaba openb trace (FGD, Weng et al., ATC'23) as a cluster of unlike nodes and a rigid workload.

The format is ``alibaba/clusterdata``, folder ``cluster-trace-gpu-v2023`` (its README defines the
columns): a node list ``sn,cpu_milli,memory_mib,gpu,model`` and a pod list ``name,cpu_milli,memory_mib,
num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time``, CPUs in milli,
memory in MiB, times in seconds on the trace's own clock, ``gpu_milli`` the share of one GPU a
GPU-sharing pod (``num_gpu`` 1) asks for, ``gpu_spec`` the GPU models a pod accepts (``V100M16|V100M32``,
empty: any). FGD replays the pods as a packing problem (they arrive and never leave); this simulator
replays them in time, so each decision below is ours and every case is counted in ``OpenbCounts``:

- **Nodes**: the nodes with GPUs, in file order, each with its own GPU count; 0-GPU nodes are dropped
  (a GPU scheduler never places a GPU pod there, and CPU-only pods are left out too).
- **Jobs**: a GPU pod is a rigid one-pod job of ``num_gpu`` GPUs, arriving at ``creation_time``, whose
  work is the time it held its GPUs in production, ``deletion_time - scheduled_time`` (at least 1 s); the
  recorded scheduling delay is dropped, since the simulated policy decides the wait.
- **Fractional pods** (``gpu_milli`` < 1000): phalanx does not share GPUs, so such a pod gets one whole
  GPU, as ``nvidia.com/gpu: 1`` would; the GPU-seconds this adds over its share are reported.
- **CPU-only pods** (``num_gpu`` 0), pods **never scheduled** (no ``scheduled_time``: ``Pending`` pods
  deleted while waiting, whose run time is unknown) and pods **without a deletion time** are left out.
  Pods still running when the trace ends (deleted at its last second) keep their cut duration.
- **gpu_spec** is read and counted but not enforced: the simulated nodes carry no GPU model label and
  the speed model has no per-model speed, so a pod may run on any GPU.
- ``qos`` and ``pod_phase`` do not change a pod's treatment (a ``Failed`` pod held its GPUs too); every
  pod is in the one default queue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import msgspec

from simulator.philly import RIGID
from simulator.traces import TraceJob, WorkloadError, _read, _Row

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
WHOLE_GPU_MILLI = 1000


@dataclass(frozen=True, slots=True)
class OpenbNode:
    """One node of the openb node list (``model`` empty for a node without GPUs)."""

    sn: str
    cpu_milli: int
    memory_mib: int
    gpu: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One pod of the openb pod list; ``None`` where the trace left a time empty."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]
    qos: str
    pod_phase: str
    creation_time: int
    deletion_time: int | None
    scheduled_time: int | None


def read_nodes(path: Path) -> tuple[OpenbNode, ...]:
    """Read an openb node list in file order.

    Raises:
        WorkloadError: a missing column, a malformed or negative number, an empty or repeated ``sn``, or
            a node with GPUs but no model.
    """
    nodes = tuple(_read(path, NODE_COLUMNS, _node_row))
    _unique(path, [node.sn for node in nodes], "sn")
    return nodes


def read_pods(path: Path) -> tuple[OpenbPod, ...]:
    """Read an openb pod list in file order.

    Raises:
        WorkloadError: a missing column, a malformed or negative number, a GPU share outside 0-1000 or
            given to a multi-GPU pod, times out of order, or an empty or repeated name.
    """
    pods = tuple(_read(path, POD_COLUMNS, _pod_row))
    _unique(path, [pod.name for pod in pods], "name")
    return pods


def _unique(path: Path, names: Sequence[str], field: str) -> None:
    seen: dict[str, int] = {}
    for line, name in enumerate(names, start=2):
        if name in seen:
            raise WorkloadError(path, line, field, f"{name!r} repeats line {seen[name]}")
        seen[name] = line


def _node_row(row: _Row) -> OpenbNode:
    gpu = row.integer("gpu", minimum=0)
    model = _optional(row, "model")
    if gpu > 0 and not model:
        raise WorkloadError(row.path, row.line, "model", f"a node of {gpu} GPUs names no GPU model")
    return OpenbNode(
        sn=row.text("sn"),
        cpu_milli=row.integer("cpu_milli", minimum=0),
        memory_mib=row.integer("memory_mib", minimum=0),
        gpu=gpu,
        model=model,
    )


def _pod_row(row: _Row) -> OpenbPod:
    num_gpu = row.integer("num_gpu", minimum=0)
    gpu_milli = row.integer("gpu_milli", minimum=0)
    if gpu_milli > WHOLE_GPU_MILLI:
        raise WorkloadError(row.path, row.line, "gpu_milli", f"{gpu_milli} is above {WHOLE_GPU_MILLI}")
    if num_gpu > 1 and gpu_milli != WHOLE_GPU_MILLI:
        problem = f"{gpu_milli} with num_gpu {num_gpu}: only a one-GPU pod shares a GPU"
        raise WorkloadError(row.path, row.line, "gpu_milli", problem)
    if num_gpu == 1 and gpu_milli == 0:
        raise WorkloadError(row.path, row.line, "gpu_milli", "0 for a GPU pod")
    created = row.integer("creation_time", minimum=0)
    deleted = _optional_time(row, "deletion_time", created)
    scheduled = _optional_time(row, "scheduled_time", created)
    if deleted is not None and scheduled is not None and deleted < scheduled:
        raise WorkloadError(row.path, row.line, "deletion_time", f"{deleted} is before scheduled_time")
    return OpenbPod(
        name=row.text("name"),
        cpu_milli=row.integer("cpu_milli", minimum=0),
        memory_mib=row.integer("memory_mib", minimum=0),
        num_gpu=num_gpu,
        gpu_milli=gpu_milli,
        gpu_spec=tuple(sorted(m.strip() for m in _optional(row, "gpu_spec").split("|") if m.strip())),
        qos=row.text("qos"),
        pod_phase=row.text("pod_phase"),
        creation_time=created,
        deletion_time=deleted,
        scheduled_time=scheduled,
    )


def _optional(row: _Row, field: str) -> str:
    value = row.values[field].strip()
    return "" if value.lower() == "nan" else value  # pandas writes an empty cell back as "nan"


def _optional_time(row: _Row, field: str, created: int) -> int | None:
    if not _optional(row, field):
        return None
    value = row.integer(field, minimum=0)
    if value < created:
        raise WorkloadError(row.path, row.line, field, f"{value} is before creation_time {created}")
    return value


class OpenbCounts(msgspec.Struct, frozen=True, kw_only=True):
    """What became of the trace's nodes and pods (printed with the run, written to ``--json``).

    Attributes:
        nodes: node rows; ``zero_gpu_nodes`` of them were dropped; ``simulated_nodes`` simulated.
        pods: pod rows; ``before_window`` and ``after_window`` were created outside the window.
        jobs: pods simulated.
        fractional: jobs whose pod asked for a share of one GPU and got a whole one.
        fractional_added_gpu_s: GPU-seconds the whole GPUs add over the shares, at recorded durations.
        cpu_only, never_scheduled, no_deletion, too_large: pods left out (``too_large``: more GPUs than
            the largest node has).
        cut_at_trace_end: jobs deleted at the trace's last second (their durations are cut short).
        gpu_spec_ignored: jobs whose pod required a GPU model (not enforced).
    """

    nodes: int
    zero_gpu_nodes: int
    simulated_nodes: int
    pods: int
    before_window: int
    after_window: int
    jobs: int
    fractional: int
    fractional_added_gpu_s: int
    cpu_only: int
    never_scheduled: int
    no_deletion: int
    too_large: int
    cut_at_trace_end: int
    gpu_spec_ignored: int


def node_sizes(nodes: Sequence[OpenbNode]) -> tuple[int, ...]:
    """GPUs of each node that has any, in file order (the simulated cluster's nodes)."""
    return tuple(node.gpu for node in nodes if node.gpu > 0)


def scale_nodes(sizes: Sequence[int], scale: float) -> tuple[int, ...]:
    """``round(len(sizes) * scale)`` of the nodes (at least one), spread evenly over the list.

    The openb cluster is far larger than its pods need at once (nothing waits), so a smaller cluster with
    the same mix of node sizes is what makes policies differ.

    >>> scale_nodes((8, 8, 2, 2, 4, 4), 0.5)
    (8, 2, 4)
    """
    count = max(1, round(len(sizes) * scale))
    return tuple(sizes[j * len(sizes) // count] for j in range(count))


def to_jobs(
    pods: Sequence[OpenbPod],
    nodes: Sequence[OpenbNode],
    sizes: Sequence[int],
    *,
    start: int = 0,
    end: int | None = None,
) -> tuple[tuple[TraceJob, ...], OpenbCounts]:
    """The GPU pods created in ``[start, end)`` as rigid jobs, times from ``start`` (module docstring).

    ``sizes`` are the simulated nodes' GPUs (a pod larger than all of them is left out). Jobs are in
    creation order, file order on ties; the cluster starts empty at ``start`` (pods created earlier and
    still running then are left out).
    """
    largest = max(sizes, default=0)
    trace_end = max((p.deletion_time for p in pods if p.deletion_time is not None), default=0)
    before = [p for p in pods if p.creation_time < start]
    after = [p for p in pods if end is not None and p.creation_time >= end]
    inside = [p for p in pods if p.creation_time >= start and (end is None or p.creation_time < end)]
    gpu = [p for p in inside if p.num_gpu > 0]
    kept = [
        p
        for p in gpu
        if p.scheduled_time is not None and p.deletion_time is not None and p.num_gpu <= largest
    ]
    order = sorted(range(len(kept)), key=lambda i: (kept[i].creation_time, i))
    jobs = tuple(_job(kept[i], start) for i in order)
    fractional = [p for p in kept if p.gpu_milli < WHOLE_GPU_MILLI]
    added = sum((WHOLE_GPU_MILLI - p.gpu_milli) * _duration(p) for p in fractional)
    counts = OpenbCounts(
        nodes=len(nodes),
        zero_gpu_nodes=sum(1 for n in nodes if n.gpu == 0),
        simulated_nodes=len(sizes),
        pods=len(pods),
        before_window=len(before),
        after_window=len(after),
        jobs=len(jobs),
        fractional=len(fractional),
        fractional_added_gpu_s=math.ceil(added / WHOLE_GPU_MILLI),
        cpu_only=len(inside) - len(gpu),
        never_scheduled=sum(1 for p in gpu if p.scheduled_time is None),
        no_deletion=sum(1 for p in gpu if p.scheduled_time is not None and p.deletion_time is None),
        too_large=sum(
            1
            for p in gpu
            if p.scheduled_time is not None and p.deletion_time is not None and p.num_gpu > largest
        ),
        cut_at_trace_end=sum(1 for p in kept if p.deletion_time == trace_end),
        gpu_spec_ignored=sum(1 for p in kept if p.gpu_spec),
    )
    return jobs, counts


def _duration(pod: OpenbPod) -> int:
    assert pod.deletion_time is not None
    assert pod.scheduled_time is not None
    return max(pod.deletion_time - pod.scheduled_time, 1)


def _job(pod: OpenbPod, start: int) -> TraceJob:
    return TraceJob(
        name=pod.name,
        time=pod.creation_time - start,
        application=RIGID,
        num_replicas=pod.num_gpu,
        batch_size=1,
        duration=_duration(pod),
    )


def describe(counts: OpenbCounts) -> str:
    """The counts as the lines printed above the table."""
    return (
        f"nodes: {counts.nodes} in the file, {counts.zero_gpu_nodes} without GPUs dropped, "
        f"{counts.simulated_nodes} simulated\n"
        f"pods: {counts.pods} in the file, {counts.before_window} before and {counts.after_window} after "
        f"the window; {counts.jobs} simulated as jobs; left out: {counts.cpu_only} CPU-only, "
        f"{counts.never_scheduled} never scheduled, {counts.no_deletion} without deletion time, "
        f"{counts.too_large} larger than any node\n"
        f"fractional-GPU pods given a whole GPU: {counts.fractional} (+{counts.fractional_added_gpu_s:,} "
        f"GPU-s over their shares); gpu_spec not enforced on {counts.gpu_spec_ignored}; "
        f"{counts.cut_at_trace_end} cut at the trace's end"
    )
