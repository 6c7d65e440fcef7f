"""One immutable view of the cluster per decision (style.md house rule 2).

The adapter keeps the per-node GPU usage up to date incrementally as watch events arrive and hands the
core a snapshot of it; building one is a shallow copy of two dictionaries, and it is reused until the
cache changes, so a request never rebuilds the cluster view from pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.gpu_usage import EMPTY_USAGE, FreeGpus, NodeGpuUsage, free_gpus
from scheduling.model import Node, Resources
from scheduling.promises import PromiseBook


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
    """

    nodes: Mapping[str, Node] = field(default_factory=lambda: MappingProxyType({}))
    usage: Mapping[str, NodeGpuUsage] = field(default_factory=lambda: MappingProxyType({}))
    version: int = 0
    base_free: Mapping[str, FreeGpus] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    def usage_of(self, node: str) -> NodeGpuUsage:
        """GPUs held by live pods on ``node``."""
        return self.usage.get(node, EMPTY_USAGE)

    def free_total(self, promises: PromiseBook) -> Resources:
        """What ready, schedulable nodes have left after live pods and promises, summed (never negative)."""
        cpu = memory = gpus = 0
        for name, node in self.nodes.items():
            if not node.ready or node.unschedulable:
                continue
            used, promised = self.usage_of(name).requested, promises.requested_on(name)
            alloc = node.allocatable
            cpu += max(0, alloc.milli_cpu - used.milli_cpu - promised.milli_cpu)
            memory += max(0, alloc.memory - used.memory - promised.memory)
            gpus += max(0, node.gpu_total - used.gpus - promised.gpus)
        return Resources(cpu, memory, gpus)

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
