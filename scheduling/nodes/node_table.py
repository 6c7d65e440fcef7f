"""Every node's GPUs index by index: who holds which, which are free, and the NVLink islands left free.

The per-node counts are the placement manager's (``scheduling.gpu.fragmentation``: a GPU is free for a
new pod only on a Ready, uncordoned node with a readable topology); the holders are the pods'
``phalanx.io/gpus`` annotations as the extender accounts them (``scheduling.cluster.usage``); the islands
come from the node's topology document (``scheduling.topology.islands``). Promises (binds in flight,
gang reservations) live only in the extender's memory and are not counted here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.usage import free_gpus
from scheduling.gpu.fragmentation import gpu_fragmentation
from scheduling.topology.islands import nvlink_islands


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node's GPUs.

    Attributes:
        name: the node.
        ready: its ``Ready`` condition is ``True``.
        cordoned: ``spec.unschedulable``.
        total: the GPUs it offers.
        allocated: the GPUs live pods hold (with or without an index annotation).
        free: the GPUs a new pod could get now (0 on a node that is not Ready, cordoned, or whose
            topology annotation is unreadable).
        free_indices: the indices nobody holds, sorted (on an unusable node too: what would be free).
        holders: GPU index -> the ``namespace/name`` of the pods whose annotation names it.
        unindexed: GPUs held by pods without a (complete) ``phalanx.io/gpus`` annotation, e.g. bound by
            another scheduler: counted, but on no known index.
        islands: the NVLink islands among ``free_indices``, largest first; ``None`` without a topology
            document (phalanx then does not know how the GPUs are joined).
        topology_problem: why the node's topology annotation is unusable, if it is.
    """

    name: str
    ready: bool
    cordoned: bool
    total: int
    allocated: int
    free: int
    free_indices: tuple[int, ...]
    holders: Mapping[int, tuple[str, ...]]
    unindexed: int
    islands: tuple[tuple[int, ...], ...] | None
    topology_problem: str | None


def node_rows(snapshot: ClusterSnapshot) -> tuple[NodeRow, ...]:
    """Every node of ``snapshot``, sorted by name (nodes without GPUs too, with zeros).

    >>> from scheduling.model import Node, Pod, Resources
    >>> from scheduling.cluster.state import state_of
    >>> pod = Pod("u", "ml", "p", Resources(gpus=2), node_name="a", gpu_indices=(0, 1), phase="Running")
    >>> [row] = node_rows(state_of([Node("a", Resources(gpus=4))], [pod]).snapshot())
    >>> row.allocated, row.free, row.free_indices, dict(row.holders)
    (2, 2, (2, 3), {0: ('ml/p',), 1: ('ml/p',)})
    """
    counts = {n.node: n for n in gpu_fragmentation(snapshot).nodes}
    rows: list[NodeRow] = []
    for name in sorted(snapshot.nodes):
        node = snapshot.nodes[name]
        usage = snapshot.usage_of(name)
        indices = tuple(sorted(free_gpus(node, usage, frozenset()).indices))
        figures = counts.get(name)
        topology = node.topology
        rows.append(
            NodeRow(
                name=name,
                ready=node.ready,
                cordoned=node.unschedulable,
                total=node.gpu_total,
                allocated=figures.allocated if figures is not None else 0,
                free=figures.free if figures is not None else 0,
                free_indices=indices,
                holders=usage.holders,
                unindexed=usage.unindexed,
                islands=None if topology is None else nvlink_islands(topology.document, indices),
                topology_problem=node.topology_problem,
            )
        )
    return tuple(rows)
