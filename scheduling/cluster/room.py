"""What one node has left for new pods: the unit of room the planners work in.

``NodeRoom`` is what a ``scheduling.cluster.statement.Statement`` hands its planners per node. ``open_room``
is that room before any promise, which ``scheduling.cluster.state.ClusterState`` keeps per node as pods come
and go, so that a planner looking at every candidate node (the gang planner at 1,000 or 5,000 of them) reads
it instead of building it from the node's usage each time.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.cluster.usage import FreeGpus, NodeGpuUsage
from scheduling.model import Node, Pod, Resources
from scheduling.resources import fits_left, minus, node_left

_NOBODY: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """What one node has left in the working copy.

    Attributes:
        node: the node.
        free: GPU indices nobody holds or has been promised.
        unindexed: GPUs held by pods whose indices are unknown (they make ``count`` smaller).
        left: CPU and memory left (``scheduling.resources.node_left``; GPUs are counted by index).
        gone: keys of pods evicted from the node in the working copy.
    """

    node: Node
    free: frozenset[int]
    unindexed: int
    left: Resources
    gone: frozenset[str] = _NOBODY

    @property
    def count(self) -> int:
        """How many GPUs a pod can still get here."""
        return max(0, len(self.free) - self.unindexed)

    def fits(self, pod: Pod) -> bool:
        """Whether ``pod`` fits what is left (GPUs on a node with a readable topology, CPU, memory)."""
        need = pod.requests
        if need.gpus and (self.node.topology_problem is not None or self.count < need.gpus):
            return False
        return fits_left(self.node, self.left, need)

    def taking(self, pod: Pod, gpus: tuple[int, ...]) -> NodeRoom | None:
        """What is left once ``pod`` takes ``gpus`` here; ``None``: it does not fit, or they are not free."""
        if not self.fits(pod) or not self.free.issuperset(gpus):
            return None
        return NodeRoom(
            self.node, self.free.difference(gpus), self.unindexed, minus(self.left, pod.requests), self.gone
        )


def open_room(node: Node, usage: NodeGpuUsage, free: FreeGpus) -> NodeRoom | None:
    """The room of ``node`` after live pods and before promises; ``None``: it takes no pods now.

    Args:
        node: the node.
        usage: what live pods on it hold.
        free: its free GPUs after those pods (``scheduling.cluster.usage.free_gpus``).
    """
    if not node.takes_pods:
        return None
    return NodeRoom(node, free.indices, usage.unindexed, node_left(node, usage.requested))
