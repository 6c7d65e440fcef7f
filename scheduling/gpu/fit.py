"""The filter decision for one pod: which candidate nodes have room for its GPUs, and why not.

kube-scheduler's own NodeResourcesFit already counts ``nvidia.com/gpu`` per node (phalanx leaves
``managedResources`` empty and GPUs counted in-tree, so that kube-scheduler's preemption still sees GPU
shortage). phalanx adds what kube-scheduler cannot know: which GPU *indices* are taken, GPUs promised to
binds in flight, and GPUs held by pods without an index annotation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling import reasons
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import MAX_NODE_GPUS, Pod
from scheduling.reasons import Rejection
from scheduling.resources import fits_left, node_left


@dataclass(frozen=True, slots=True)
class FilterDecision:
    """The outcome of filtering one pod over candidate nodes.

    Attributes:
        feasible: the nodes that can take the pod, in the order kube-scheduler sent them.
        rejected: node name -> why it cannot take the pod.
    """

    feasible: tuple[str, ...]
    rejected: Mapping[str, Rejection]


def filter_nodes(
    pod: Pod, candidates: Sequence[str], snapshot: ClusterSnapshot, promises: PromiseBook
) -> FilterDecision:
    """Keep the candidates with enough free GPUs for ``pod``; give every other one a reason.

    Args:
        pod: the pod being scheduled.
        candidates: node names as kube-scheduler sent them (duplicates are decided once).
        snapshot: the cluster view.
        promises: GPUs promised to binds in flight.

    Returns:
        Feasible nodes in request order, and a rejection for each other node.
    """
    feasible: list[str] = []
    rejected: dict[str, Rejection] = {}
    node_of, base_free_of = snapshot.nodes.get, snapshot.base_free.get
    promised_nodes = promises.requested_by_node
    need = pod.requests.gpus
    too_few: dict[int, Rejection] = {}  # one sentence per free count, shared by the nodes it describes
    for name in dict.fromkeys(candidates):
        # Fast path, the common case at thousands of candidates: a known, healthy node with nothing
        # promised on it, decided from its free-GPU record alone (the same answer and reason as the full
        # check). Everything else takes the full check with its reason.
        node = node_of(name)
        if node is not None and name not in promised_nodes and node.topology_problem is None:
            free = base_free_of(name)
            if free is not None:
                if free.count >= need:
                    feasible.append(name)
                    continue
                if node.gpu_total >= need:
                    reason = too_few.get(free.count)
                    if reason is None:
                        reason = too_few[free.count] = reasons.too_few_free_gpus(free.count, need)
                    rejected[name] = reason
                    continue
        rejection = _rejection(name, pod, snapshot, promises)
        if rejection is None:
            feasible.append(name)
        else:
            rejected[name] = rejection
    return FilterDecision(tuple(feasible), MappingProxyType(rejected))


def _rejection(name: str, pod: Pod, snapshot: ClusterSnapshot, promises: PromiseBook) -> Rejection | None:
    node = snapshot.nodes.get(name)
    if node is None:
        return reasons.unknown_node()
    need = pod.requests
    promised = promises.requested_on(name)
    if promised.milli_cpu or promised.memory:
        # kube-scheduler counted CPU and memory without our promises; only they can make the node short.
        left = node_left(node, snapshot.usage_of(name).requested, promised)
        if not fits_left(node, left, need):
            return reasons.reserved("CPU or memory")
    if need.gpus == 0:
        return None
    if node.gpu_problem is not None:
        return reasons.gpus_refused(MAX_NODE_GPUS)
    if node.topology_problem is not None:
        return reasons.unreadable_topology()
    total = node.gpu_total
    if total < need.gpus:
        return reasons.too_few_gpus(total, need.gpus)
    free = snapshot.free_on(name, promises)
    if free is None or free.count >= need.gpus:
        return None  # (None only for a node that vanished between the checks above and here)
    if (snapshot.free_on(name, PromiseBook()) or free).count >= need.gpus:
        return reasons.reserved("GPUs")
    return reasons.too_few_free_gpus(free.count, need.gpus)
