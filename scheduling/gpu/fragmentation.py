"""How the cluster's GPUs are held and how scattered the free ones are, for the placement manager's metrics.

A gang of 8-GPU members needs whole free nodes: 16 free GPUs spread two per node over eight nodes place
none of it. ``largest_free_block`` (the most free GPUs on one node) and ``partial_nodes`` (nodes with some
but not all of their GPUs free) tell an operator whether free capacity is usable or fragmented.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.usage import free_gpus

_NOTHING_PROMISED: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class NodeGpus:
    """One node's GPUs.

    Attributes:
        node: the node's name.
        total: the GPUs it offers.
        allocated: the GPUs live pods hold.
        free: the GPUs a new pod could get now: 0 on a node that is not Ready, cordoned or whose topology
            annotation is unreadable (so ``allocated + free`` may be less than ``total``).
    """

    node: str
    total: int
    allocated: int
    free: int


@dataclass(frozen=True, slots=True)
class GpuFragmentation:
    """Every GPU node's figures and how the free GPUs are spread.

    Attributes:
        nodes: one entry per node with GPUs, sorted by name.
        partial_nodes: nodes with some but not all of their GPUs free.
        largest_free_block: the most free GPUs on one node.
    """

    nodes: tuple[NodeGpus, ...]
    partial_nodes: int
    largest_free_block: int


def gpu_fragmentation(snapshot: ClusterSnapshot) -> GpuFragmentation:
    """Count total, allocated and free GPUs per node, nodes partly free and the largest free block.

    Promises are not counted: the placement manager has none, and a promise is a bind in flight.

    >>> from scheduling.model import Node, Pod, Resources
    >>> from scheduling.cluster.state import state_of
    >>> nodes = [Node("a", Resources(gpus=8)), Node("b", Resources(gpus=8)), Node("c", Resources())]
    >>> pod = Pod("u", "ml", "p", Resources(gpus=3), node_name="a", gpu_indices=(0, 1, 2), phase="Running")
    >>> figures = gpu_fragmentation(state_of(nodes, [pod]).snapshot())
    >>> figures.nodes[0], figures.partial_nodes, figures.largest_free_block
    (NodeGpus(node='a', total=8, allocated=3, free=5), 1, 8)
    """
    nodes: list[NodeGpus] = []
    for name in sorted(snapshot.nodes):
        node = snapshot.nodes[name]
        total = node.gpu_total
        if total == 0:
            continue
        left = free_gpus(node, snapshot.usage_of(name), _NOTHING_PROMISED).count
        usable = node.ready and not node.unschedulable and node.topology_problem is None
        nodes.append(NodeGpus(name, total, total - left, left if usable else 0))
    return GpuFragmentation(
        tuple(nodes),
        partial_nodes=sum(1 for n in nodes if 0 < n.free < n.total),
        largest_free_block=max((n.free for n in nodes), default=0),
    )
