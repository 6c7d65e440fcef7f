"""One immutable view of the cluster per decision (style.md house rule 2).

The adapter keeps the per-node GPU usage up to date incrementally as watch events arrive and hands the
core a snapshot of it; building one is a shallow copy of two dictionaries, and it is reused until the
cache changes, so a request never rebuilds the cluster view from pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.gpu_usage import EMPTY_USAGE, FreeGpus, NodeGpuUsage, free_gpus
from scheduling.model import Node, Resources
from scheduling.promises import PromiseBook
from scheduling.queues.resources import minus, total

_NOTHING = Resources()


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Nodes and their GPU usage at one moment.

    Attributes:
        nodes: node name -> node.
        usage: node name -> GPUs held by live pods; a node missing here holds nothing.
        version: the cache's change counter when the snapshot was taken, for logs and replays.
        base_free: node name -> free GPUs after live pods (before promises), kept up to date per node by
            the cache so that filter reads one entry per candidate instead of recomputing it; nodes missing
            here are computed on demand.
        room_total: ``node_room`` summed over every node before promises, kept as a running total by the
            cache so that ``free_total`` (asked on every filter by the queue rules) costs one term per
            node with promises instead of a walk over every node; ``None``: walk.
    """

    nodes: Mapping[str, Node] = field(default_factory=lambda: MappingProxyType({}))
    usage: Mapping[str, NodeGpuUsage] = field(default_factory=lambda: MappingProxyType({}))
    version: int = 0
    base_free: Mapping[str, FreeGpus] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    room_total: Resources | None = field(default=None, compare=False)

    def usage_of(self, node: str) -> NodeGpuUsage:
        """GPUs held by live pods on ``node``."""
        return self.usage.get(node, EMPTY_USAGE)

    def free_total(self, promises: PromiseBook) -> Resources:
        """What ready, schedulable nodes have left after live pods and promises, summed (never negative)."""
        if self.room_total is None:
            return total_room(self.nodes.items(), self.usage, promises)
        room = self.room_total
        for name, promised in promises.requested_by_node.items():
            node = self.nodes.get(name)
            if node is not None:
                used = self.usage_of(name).requested
                room = minus(room, minus(node_room(node, used), node_room(node, used, promised)))
        return room

    def free_on(self, node: str, promises: PromiseBook) -> FreeGpus | None:
        """Free GPUs of ``node`` after live pods and open promises, or ``None`` for an unknown node."""
        promised = promises.by_node.get(node)
        base = self.base_free.get(node)
        if base is not None and not promised:
            return base
        info = self.nodes.get(node)
        if info is None:
            return None
        return free_gpus(info, self.usage_of(node), promised or frozenset())


def node_room(node: Node, used: Resources, promised: Resources = _NOTHING) -> Resources:
    """What ``node`` has left after ``used`` and ``promised`` (never negative; nothing if not schedulable)."""
    if not node.ready or node.unschedulable:
        return _NOTHING
    alloc = node.allocatable
    return Resources(
        max(0, alloc.milli_cpu - used.milli_cpu - promised.milli_cpu),
        max(0, alloc.memory - used.memory - promised.memory),
        max(0, node.gpu_total - used.gpus - promised.gpus),
    )


def total_room(
    nodes: Iterable[tuple[str, Node]], usage: Mapping[str, NodeGpuUsage], promises: PromiseBook
) -> Resources:
    """``node_room`` summed over ``nodes``, after live pods and promises: the walk ``room_total`` saves."""
    return total(
        node_room(node, usage.get(name, EMPTY_USAGE).requested, promises.requested_on(name))
        for name, node in nodes
    )
