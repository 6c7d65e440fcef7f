"""Which GPUs of a node are taken, index by index.

Accounting is per GPU index, not per count (docs/design/nvlink-topology.md §6): phalanx chooses the indices
for each pod and writes them into the ``phalanx.io/gpus`` annotation through the Binding, so a pod's
annotation is the durable record of what it holds, and a restarted extender rebuilds this view from the API
server. Pods that hold GPUs without the annotation (bound by another scheduler) are counted but cannot be
placed on an index; they reduce the free count instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.model import Node, Pod, Resources

_NO_HOLDERS: Mapping[int, tuple[str, ...]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class NodeGpuUsage:
    """The GPUs of one node held by live pods.

    Attributes:
        holders: GPU index -> keys of the live pods whose annotation names it, sorted.
        unindexed: GPUs held by live pods whose annotation is missing or does not cover their request.
        requested: the sum of the live pods' requests (CPU and memory matter when a gang is planned).
    """

    holders: Mapping[int, tuple[str, ...]] = field(default_factory=lambda: _NO_HOLDERS)
    unindexed: int = 0
    requested: Resources = field(default_factory=Resources)

    @staticmethod
    def of_pods(pods: Iterable[Pod]) -> NodeGpuUsage:
        """Count the GPUs held by the given pods; pods that hold no resources are ignored.

        >>> from scheduling.model import Resources
        >>> a = Pod("u1", "ns", "a", Resources(gpus=2), node_name="n", gpu_indices=(0, 1))
        >>> b = Pod("u2", "ns", "b", Resources(gpus=1), node_name="n")
        >>> usage = NodeGpuUsage.of_pods([a, b])
        >>> sorted(usage.held), usage.unindexed
        ([0, 1], 1)
        """
        holders: dict[int, list[str]] = {}
        unindexed = cpu = memory = gpus = 0
        for pod in pods:
            if not pod.holds_resources:
                continue
            cpu += pod.requests.milli_cpu
            memory += pod.requests.memory
            gpus += pod.requests.gpus
            if pod.requests.gpus == 0:
                continue
            indices = pod.gpu_indices
            if indices is None or len(indices) != pod.requests.gpus:
                unindexed += pod.requests.gpus
                continue
            for index in indices:
                holders.setdefault(index, []).append(pod.key)
        frozen = {index: tuple(sorted(keys)) for index, keys in sorted(holders.items())}
        return NodeGpuUsage(MappingProxyType(frozen), unindexed, Resources(cpu, memory, gpus))

    @property
    def held(self) -> frozenset[int]:
        """Indices held by at least one live pod."""
        return frozenset(self.holders)


EMPTY_USAGE = NodeGpuUsage()


@dataclass(frozen=True, slots=True)
class FreeGpus:
    """What a pod may get on one node right now.

    Attributes:
        indices: GPU indices nobody holds or has been promised.
        count: how many GPUs a pod can still get; less than ``len(indices)`` when pods without an
            annotation hold GPUs whose indices phalanx does not know.
    """

    indices: frozenset[int]
    count: int


def free_gpus(node: Node, usage: NodeGpuUsage, promised: frozenset[int]) -> FreeGpus:
    """Return the GPUs of ``node`` that a new pod may take.

    Args:
        node: the node.
        usage: what live pods on the node hold.
        promised: indices promised to pods whose binding is not yet visible in the cache.

    >>> from scheduling.model import Resources
    >>> node = Node("n", Resources(gpus=4))
    >>> free_gpus(node, NodeGpuUsage.of_pods([]), frozenset({3}))
    FreeGpus(indices=frozenset({0, 1, 2}), count=3)
    """
    indices = node.gpu_indices - usage.held - promised
    return FreeGpus(indices, max(0, len(indices) - usage.unindexed))
