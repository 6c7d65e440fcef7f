"""FGD's packing experiment on the openb nodes: pods drawn from the trace arrive, are placed, never leave.

Replayed in time, openb never loads its cluster (no pod waits, so every policy agrees: ``openb``). FGD
(Weng et al., "Beware of Fragmentation", ATC'23) measures packing instead: pods drawn from the trace's
own pods (with replacement, so each kind of pod comes as often as in the trace) arrive one after another
until what they ask for reaches the cluster's GPU capacity; each is placed at once or never (no queue,
no preemption, nothing leaves), and what counts is the share of the GPUs allocated as the cluster
fills, and the GPUs left unallocated at the end: GPUs no arriving pod could use, stranded on nodes
whose remaining GPUs, CPU or memory fit none.

phalanx does not share GPUs, so a pod asking for part of one GPU is given a whole one (as ``openb.py``
does), and the arrivals are counted in the whole GPUs they take: the figures compare policies on the
same whole-GPU workload, not with FGD's published GPU-sharing figures. Every policy places the same
arrivals (one ``--seed``), on the same free CPU, memory and GPUs per node:

- ``phalanx``: the node the extender's decisive filter answers with (``scheduling.nodes.decisive``),
  on a ``ClusterState`` fed every placement, as the extender's cache would be;
- ``fgd``: FGD's rule on whole GPUs: the node whose fragmentation grows least, a node's fragmentation
  being the free GPUs it strands for the trace's mix of pods (``fragmentation``);
- ``best-fit`` (the fewest GPUs left, then the least CPU), ``worst-fit`` (the most GPUs left:
  kube-scheduler's default ``LeastAllocated`` spreads so), ``first-fit`` (node order), ``random``.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.state import ClusterState
from scheduling.model import Node, Pod, Resources
from scheduling.nodes.decisive import TieMemo, decisive_node
from scheduling.nodes.ranking import ScoreMemo
from scheduling.topology import TopologyCache
from simulator.openb import WHOLE_GPU_MILLI, OpenbNode, OpenbPod

MIB = 2**20
CHECKPOINTS = tuple(range(10, 101, 10))
"""Arrivals, in % of the GPU capacity, at which the allocation rate is recorded."""

FGD_CLASSES = 0.99
"""FGD weighs fragmentation by the kinds of pods that make up this share of the trace's GPU pods."""


@dataclass(frozen=True, slots=True)
class Task:
    """One arriving pod: what it asks for, in whole GPUs."""

    cpu_milli: int
    memory_mib: int
    gpus: int


def tasks_of(pods: Sequence[OpenbPod]) -> tuple[Task, ...]:
    """The trace's GPU pods as tasks (a fractional pod takes one whole GPU); CPU-only pods are left out."""
    return tuple(
        Task(p.cpu_milli, p.memory_mib, max(p.num_gpu, 1 if 0 < p.gpu_milli < WHOLE_GPU_MILLI else 0))
        for p in pods
        if p.num_gpu > 0
    )


def draw(tasks: Sequence[Task], capacity_gpus: int, until: float, seed: int) -> tuple[Task, ...]:
    """Tasks drawn with replacement until the GPUs they ask for reach ``until`` x ``capacity_gpus``."""
    rng = random.Random(seed)
    out: list[Task] = []
    asked = 0
    while asked < until * capacity_gpus:
        task = tasks[rng.randrange(len(tasks))]
        out.append(task)
        asked += task.gpus
    return tuple(out)


class Free:
    """Free CPU, memory and GPUs per node, in node order (what every policy reads and ``take`` changes)."""

    def __init__(self, nodes: Sequence[OpenbNode]) -> None:
        self.names = tuple(n.sn for n in nodes)
        self.cpu = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.memory = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.gpus = np.array([n.gpu for n in nodes], dtype=np.int64)

    def fitting(self, task: Task) -> NDArray[np.intp]:
        """The indices of the nodes with room for ``task``, in node order."""
        fits = (self.cpu >= task.cpu_milli) & (self.memory >= task.memory_mib) & (self.gpus >= task.gpus)
        return np.flatnonzero(fits)

    def take(self, index: int, task: Task) -> None:
        """Place ``task`` on node ``index``."""
        self.cpu[index] -= task.cpu_milli
        self.memory[index] -= task.memory_mib
        self.gpus[index] -= task.gpus


Policy = Callable[[Task, Free, NDArray[np.intp]], int]
"""Chooses one of the fitting nodes (a non-empty array of indices) for a task."""


def first_fit(_task: Task, _free: Free, fitting: NDArray[np.intp]) -> int:
    """The first node in the list with room."""
    return int(fitting[0])


def best_fit(task: Task, free: Free, fitting: NDArray[np.intp]) -> int:
    """The fewest GPUs left after it, then the least CPU left, then node order (lexsort: last key first)."""
    order = np.lexsort((fitting, free.cpu[fitting] - task.cpu_milli, free.gpus[fitting] - task.gpus))
    return int(fitting[order[0]])


def worst_fit(task: Task, free: Free, fitting: NDArray[np.intp]) -> int:
    """The most GPUs left after it, then node order."""
    order = np.lexsort((fitting, -(free.gpus[fitting] - task.gpus)))
    return int(fitting[order[0]])


def random_fit(seed: int) -> Policy:
    """Any node with room, drawn with ``seed``."""
    rng = random.Random(seed)
    return lambda _task, _free, fitting: int(fitting[rng.randrange(len(fitting))])


def fragmentation(tasks: Sequence[Task]) -> Policy:
    """FGD on whole GPUs: the node whose stranded GPUs, expected over the trace's mix, grow least.

    A node strands its free GPUs for a kind of pod it has no room for (GPUs, CPU or memory short); with
    whole GPUs there is no partly used GPU, so that is all FGD's measure counts here. The mix is the
    kinds that make up ``FGD_CLASSES`` of the pods, each weighed by how often it comes.
    """
    counts = Counter(tasks).most_common()
    total, kept, seen = len(tasks), [], 0
    for kind, count in counts:
        kept.append((kind, count))
        seen += count
        if seen >= FGD_CLASSES * total:
            break
    weight = np.array([c for _, c in kept], dtype=np.float64) / seen
    cpu = np.array([k.cpu_milli for k, _ in kept], dtype=np.int64)[:, None]
    memory = np.array([k.memory_mib for k, _ in kept], dtype=np.int64)[:, None]
    gpus = np.array([k.gpus for k, _ in kept], dtype=np.int64)[:, None]

    def stranded(
        free_cpu: NDArray[np.int64], free_memory: NDArray[np.int64], free_gpus: NDArray[np.int64]
    ) -> NDArray[np.float64]:
        short = (cpu > free_cpu) | (memory > free_memory) | (gpus > free_gpus)  # kinds x nodes
        out: NDArray[np.float64] = (weight[:, None] * short).sum(axis=0) * free_gpus
        return out

    def choose(task: Task, free: Free, fitting: NDArray[np.intp]) -> int:
        c, m, g = free.cpu[fitting], free.memory[fitting], free.gpus[fitting]
        grows = stranded(c - task.cpu_milli, m - task.memory_mib, g - task.gpus) - stranded(c, m, g)
        order = np.lexsort((fitting, grows))
        return int(fitting[order[0]])

    return choose


class Decisive:
    """phalanx's choice: the extender's decisive filter on a cluster state fed every placement."""

    def __init__(self, nodes: Sequence[OpenbNode]) -> None:
        self._state = ClusterState()
        self._state.replace_nodes(
            [Node(n.sn, Resources(n.cpu_milli, n.memory_mib * MIB, n.gpu)) for n in nodes]
        )
        self._used: dict[str, list[bool]] = {n.sn: [False] * n.gpu for n in nodes}
        self._topologies, self._memo, self._ties = TopologyCache(), ScoreMemo(), TieMemo()
        self._count = 0

    def __call__(self, task: Task, free: Free, fitting: NDArray[np.intp]) -> int:
        """The decisive node among ``fitting``; the task is then bound there in the cluster state."""
        self._count += 1
        pod = Pod(
            f"u{self._count}",
            "pack",
            f"p{self._count}",
            Resources(task.cpu_milli, task.memory_mib * MIB, task.gpus),
        )
        names = [free.names[i] for i in fitting]
        chosen = decisive_node(
            pod, names, self._state.snapshot(), PromiseBook(), self._topologies, self._memo, self._ties
        )
        index = int(fitting[names.index(chosen)]) if chosen is not None else int(fitting[0])
        name = free.names[index]
        used = self._used[name]
        gpus = tuple(i for i, taken in enumerate(used) if not taken)[: task.gpus]
        for i in gpus:
            used[i] = True
        self._state.put_pod(
            Pod(
                pod.uid,
                pod.namespace,
                pod.name,
                pod.requests,
                node_name=name,
                gpu_indices=gpus,
                phase="Running",
            )
        )
        return index


@dataclass(frozen=True, slots=True)
class Packing:
    """What one policy made of the arrivals.

    Attributes:
        policy: its name.
        allocated: GPUs allocated when the arrivals reached each of ``CHECKPOINTS`` % of the capacity.
        placed: pods placed in all; ``refused``: pods no node had room for.
        unallocated: GPUs left free at the end.
    """

    policy: str
    allocated: Mapping[int, int]
    placed: int
    refused: int
    unallocated: int


def pack(nodes: Sequence[OpenbNode], arrivals: Sequence[Task], name: str, policy: Policy) -> Packing:
    """Place ``arrivals`` in order with ``policy``; record the allocation at every checkpoint."""
    free = Free(nodes)
    capacity = int(free.gpus.sum())
    allocated: dict[int, int] = {}
    asked = used = placed = refused = 0
    marks = iter(CHECKPOINTS)
    mark = next(marks, None)
    for task in arrivals:
        fitting = free.fitting(task)
        if len(fitting):
            index = policy(task, free, fitting)
            free.take(index, task)
            used += task.gpus
            placed += 1
        else:
            refused += 1
        asked += task.gpus
        while mark is not None and asked >= mark / 100 * capacity:
            allocated[mark] = used
            mark = next(marks, None)
    return Packing(name, allocated, placed, refused, capacity - used)


def policies(nodes: Sequence[OpenbNode], tasks: Sequence[Task], seed: int) -> dict[str, Callable[[], Policy]]:
    """Each policy by name, built fresh for a run (``phalanx`` keeps a cluster state, ``random`` a draw)."""
    return {
        "phalanx": lambda: Decisive(nodes),
        "fgd": lambda: fragmentation(tasks),
        "best-fit": lambda: best_fit,
        "worst-fit": lambda: worst_fit,
        "first-fit": lambda: first_fit,
        "random": lambda: random_fit(seed),
    }
