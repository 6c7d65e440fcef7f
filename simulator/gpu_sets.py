"""Which GPU indices each job holds on each node, and whether a placement used NVLink where it could.

The loop's allocation names nodes only. GPU indices inside a node are decided as in the product:

- **phalanx** decides them through the core (the GPUs the extender's bind chooses:
  ``scheduling.session.choose_for_bind``, a gang's reservation, the elastic plan's moves); a policy that
  decides indices says so by having ``gpu_sets`` (:class:`ChoosesGpus`);
- **every other policy** gets what a topology-blind device plugin gives: the lowest free indices of
  each node, jobs taken in the order the policy listed them (:func:`first_fit`).

A job whose allocation did not change keeps its indices. The NVLink figure is judged when a job is
(re)placed, per node part of two or more GPUs: a part counts when the node's GPUs not held by any other
job after the decision contain a set of that size in which every pair is joined by NVLink (directly or
through an NVSwitch); it is met when the part itself is such a set (:func:`nvlink_verdict`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from scheduling.topology import NodeTopology
from simulator.speed import Advance, Placement, Progress
from simulator.traces import TraceJob

GpuSets = tuple[tuple[int, tuple[int, ...]], ...]
"""A job's GPUs: (node index, its GPU indices ascending) per node, by node index: ((0, (0, 1)), (3, (4,)))."""


class GpuSetError(ValueError):
    """A policy named GPU indices that do not match its allocation or that another job holds."""


@runtime_checkable
class ChoosesGpus(Protocol):
    """A policy that decides GPU indices itself (phalanx, through the core)."""

    def gpu_sets(self, state: Any) -> Mapping[str, GpuSets]:
        """Every running job's GPU indices in ``state`` (the state its last decision returned)."""
        ...


@runtime_checkable
class SpeedOnSets(Protocol):
    """A speed model that reads the GPU indices a job holds (``simulator.link_speed.LinkSpeed``)."""

    def advance_on(
        self, job: TraceJob, progress: Progress, placement: Placement, sets: GpuSets, seconds: int
    ) -> Advance:
        """Train ``job`` for ``seconds`` on ``placement``, whose GPU indices are ``sets``."""
        ...


def counts_of(allocation: Sequence[int]) -> dict[int, int]:
    """GPUs per node index of an allocation."""
    return dict(Counter(allocation))


def first_fit(free: Mapping[int, set[int]], allocation: Sequence[int]) -> GpuSets:
    """The lowest free indices on each node of ``allocation``; takes them out of ``free``.

    >>> free = {0: {1, 2, 3}, 1: {0, 1}}
    >>> first_fit(free, (0, 0, 1)), free
    (((0, (1, 2)), (1, (0,))), {0: {3}, 1: {1}})
    """
    out = []
    for node, count in sorted(counts_of(allocation).items()):
        taken = tuple(sorted(free[node])[:count])
        if len(taken) < count:
            msg = f"node {node}: {count} GPUs asked, {len(taken)} free"
            raise GpuSetError(msg)
        free[node] -= set(taken)
        out.append((node, taken))
    return tuple(out)


def place_gpus(
    decided: Mapping[str, Sequence[int]],
    chosen: Mapping[str, GpuSets],
    held: Mapping[str, GpuSets],
    capacity: Sequence[int],
) -> dict[str, GpuSets]:
    """Every allocated job's GPU indices after a decision.

    Args:
        decided: each job's allocation (node index per GPU), in the policy's order.
        chosen: indices the policy decided itself (:class:`ChoosesGpus`), which win.
        held: each job's indices before the decision.
        capacity: GPUs per node.

    Raises:
        GpuSetError: a chosen set disagrees with the job's allocation or overlaps another job's.
    """
    out: dict[str, GpuSets] = {}
    later: list[str] = []
    for name, allocation in decided.items():
        wanted = counts_of(allocation)
        sets = chosen.get(name)
        if sets is not None:
            if {node: len(gpus) for node, gpus in sets} != wanted:
                msg = f"job {name}: GPU indices {sets} do not match its allocation {tuple(allocation)}"
                raise GpuSetError(msg)
            out[name] = sets
        elif {node: len(gpus) for node, gpus in held.get(name, ())} == wanted:
            out[name] = held[name]
        else:
            later.append(name)
    free = {node: set(range(count)) for node, count in enumerate(capacity)}
    for name, sets in out.items():
        for node, gpus in sets:
            if not set(gpus) <= free[node]:
                msg = f"job {name}: GPUs {gpus} of node {node} are held by another job or do not exist"
                raise GpuSetError(msg)
            free[node] -= set(gpus)
    for name in later:
        out[name] = first_fit(free, decided[name])
    return out


def fully_nvlinked(topology: NodeTopology, gpus: Sequence[int]) -> bool:
    """Whether every pair of ``gpus`` is joined by NVLink (directly, or both through an NVSwitch)."""
    distance = topology.distance
    return all(distance[a][b] == 0 for i, a in enumerate(gpus) for b in gpus[i + 1 :])


def nvlink_set_exists(topology: NodeTopology, available: frozenset[int], size: int) -> bool:
    """Whether ``available`` holds ``size`` GPUs that are pairwise joined by NVLink."""
    return _clique_exists(topology, available, size)


@lru_cache(maxsize=65_536)
def _clique_exists(topology: NodeTopology, available: frozenset[int], size: int) -> bool:
    distance = topology.distance
    gpus = sorted(g for g in available if g < topology.gpu_count)

    def grow(chosen: tuple[int, ...], start: int) -> bool:
        if len(chosen) == size:
            return True
        for i in range(start, len(gpus) - (size - len(chosen)) + 1):
            g = gpus[i]
            if all(distance[c][g] == 0 for c in chosen) and grow((*chosen, g), i + 1):
                return True
        return False

    return size <= len(gpus) and grow((), 0)


def nvlink_verdict(
    sets: GpuSets, others: Mapping[int, frozenset[int]], topologies: Sequence[NodeTopology | None]
) -> bool | None:
    """Judge one placement: ``None`` when no part could have been NVLink-connected, else whether all were.

    Args:
        sets: the job's new GPU indices.
        others: per node index, the GPUs other jobs hold after the decision.
        topologies: each node's topology (``None``: no document, so no NVLink to judge).
    """
    verdict: bool | None = None
    for node, gpus in sets:
        topology = topologies[node] if node < len(topologies) else None
        if topology is None or len(gpus) < 2:
            continue
        available = frozenset(range(topology.gpu_count)) - others.get(node, frozenset())
        if not nvlink_set_exists(topology, available, len(gpus)):
            continue
        met = fully_nvlinked(topology, gpus)
        verdict = met if verdict is None else verdict and met
    return verdict


def held_by_node(held: Mapping[str, GpuSets]) -> dict[int, dict[str, frozenset[int]]]:
    """Per node index, the GPUs each job holds there."""
    out: dict[int, dict[str, frozenset[int]]] = {}
    for name, sets in held.items():
        for node, gpus in sets:
            out.setdefault(node, {})[name] = frozenset(gpus)
    return out


def others_of(
    name: str, sets: GpuSets, by_node: Mapping[int, Mapping[str, frozenset[int]]]
) -> dict[int, frozenset[int]]:
    """Per node of ``sets``, the GPUs jobs other than ``name`` hold there."""
    out = {}
    for node, _ in sets:
        out[node] = frozenset().union(*(g for job, g in by_node.get(node, {}).items() if job != name))
    return out


def judge_placements(
    decided: Mapping[str, Sequence[int]],
    chosen: Mapping[str, GpuSets],
    held: Mapping[str, GpuSets],
    capacity: Sequence[int],
    topologies: Sequence[NodeTopology | None],
) -> dict[str, tuple[GpuSets, bool | None]]:
    """Each allocated job's GPU indices (:func:`place_gpus`) and, where they changed, the NVLink verdict."""
    placed = place_gpus(decided, chosen, held, capacity)
    by_node = held_by_node(placed) if topologies else {}
    out: dict[str, tuple[GpuSets, bool | None]] = {}
    for name, sets in placed.items():
        verdict = None
        if topologies and sets != held.get(name):
            verdict = nvlink_verdict(sets, others_of(name, sets, by_node), topologies)
        out[name] = (sets, verdict)
    return out
