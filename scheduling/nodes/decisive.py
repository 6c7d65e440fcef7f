"""The decisive choice: the one node phalanx's ranking puts first, for a filter that answers with it alone.

kube-scheduler v1.36 (``schedulePod`` in ``pkg/scheduler/schedule_one.go``) takes the only node left after
the extenders' filter as it is: it runs no Score plugin and calls no extender ``prioritize``. So a filter
that returns just the node phalanx would rank first removes a whole step per pod (the ``prioritize``
round trip and every in-tree Score plugin), provided the answer is the node the ranked path would have
picked. This module is that answer: the candidates ranked by ``scheduling.nodes.ranking`` (the very
scores ``prioritize`` returns), and among the nodes tied at the top the one kube-scheduler's own
packing score prefers, ``NodeResourcesFit`` with ``MostAllocated`` weighted as the shipped profile
weighs it (``manifests/scheduler-config.yaml``), then the name. With phalanx's weight of 5 a one-point
lead in phalanx's score is 50 points of kube-scheduler's total, and ties are where the in-tree scores
decide, so the model is used exactly there; ``tests/scheduling/nodes/test_decisive.py`` shows how often
kube-scheduler's own scores would still have picked another node (where they outweigh a one-point lead
of phalanx's score).

Pods whose placement depends on what phalanx does not model (preferred node or pod affinity,
``ScheduleAnyway`` spread) are not given to this module: the driver keeps the ranked path for them.
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Node, Pod, Resources
from scheduling.nodes.ranking import ScoreMemo, rank_nodes
from scheduling.topology import TopologyCache

MAX_NODE_SCORE = 100
"""kube-scheduler's ``framework.MaxNodeScore``."""

FIT_WEIGHTS = (1, 1, 5)
"""``NodeResourcesFit`` ``MostAllocated`` weights of cpu, memory and ``nvidia.com/gpu`` in the shipped
profile (``manifests/scheduler-config.yaml``)."""

DEFAULT_MILLI_CPU = 100
"""What kube-scheduler counts for a container without a CPU request when it scores (``schedutil``)."""

DEFAULT_MEMORY = 200 * 2**20
"""What kube-scheduler counts for a container without a memory request when it scores."""


def most_allocated(node: Node, requested: Resources, pod: Resources) -> int:
    """kube-scheduler's ``MostAllocated`` score of ``node`` for a pod: how full it would be, 0..100.

    Each resource scores ``requested_after * 100 // allocatable`` (0 when over), weighted by
    ``FIT_WEIGHTS``; a resource the node does not offer is left out of the weights, as upstream does.
    """
    cpu = pod.milli_cpu or DEFAULT_MILLI_CPU
    memory = pod.memory or DEFAULT_MEMORY
    alloc = node.allocatable
    pairs = (
        (requested.milli_cpu + cpu, alloc.milli_cpu),
        (requested.memory + memory, alloc.memory),
        (requested.gpus + pod.gpus, alloc.gpus),
    )
    total = weights = 0
    for (used, capacity), weight in zip(pairs, FIT_WEIGHTS, strict=True):
        if capacity <= 0:
            continue
        weights += weight
        if used <= capacity:
            total += used * MAX_NODE_SCORE // capacity * weight
    return total // weights if weights else 0


def balanced_allocation(node: Node, requested: Resources, pod: Resources) -> int:
    """kube-scheduler's ``NodeResourcesBalancedAllocation`` score over cpu and memory, 0..100.

    ``(1 - std) * 100`` of the two fractions requested after the pod (each capped at 1); for two
    resources the standard deviation is half their difference.
    """
    alloc = node.allocatable
    if alloc.milli_cpu <= 0 or alloc.memory <= 0:
        return 0
    cpu = min((requested.milli_cpu + (pod.milli_cpu or DEFAULT_MILLI_CPU)) / alloc.milli_cpu, 1.0)
    memory = min((requested.memory + (pod.memory or DEFAULT_MEMORY)) / alloc.memory, 1.0)
    return int((1 - abs(cpu - memory) / 2) * MAX_NODE_SCORE)


def in_tree_score(node: Node, requested: Resources, pod: Resources) -> int:
    """What kube-scheduler's resource scores add for ``node`` in the shipped profile (both weight 1)."""
    return most_allocated(node, requested, pod) + balanced_allocation(node, requested, pod)


def decisive_node(
    pod: Pod,
    feasible: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    topologies: TopologyCache,
    memo: ScoreMemo | None = None,
) -> str | None:
    """The node to answer ``filter`` with alone, or ``None`` when there is nothing to choose between.

    Args:
        pod: a pod whose placement phalanx decides fully (the driver checked).
        feasible: the nodes filter found feasible for it.
        snapshot: the cluster view the filter read.
        promises: the promise book the filter read.
        topologies: the topology cache ``prioritize`` uses.
        memo: the score memo ``prioritize`` uses (same answer without it).

    Returns:
        The candidate with the highest phalanx score; among ties the highest ``in_tree_score`` (what
        kube-scheduler's resource scoring adds), then the smallest name. ``None`` for fewer than
        two distinct candidates (a single node needs no choice; kube-scheduler skips scoring anyway).
    """
    if len(feasible) < 2:
        return None
    scores = rank_nodes(pod, feasible, snapshot, promises, topologies, memo)
    if len(scores) < 2:
        return None
    top = max(score for _, score in scores)
    tied = sorted(name for name, score in scores if score == top)
    if len(tied) == 1:
        return tied[0]
    best, best_fit = tied[0], -1
    for name in tied:  # sorted, so a strictly higher score is needed to displace a smaller name
        node = snapshot.nodes.get(name)
        if node is None:
            continue
        used = snapshot.usage_of(name).requested
        promised = promises.requested_on(name)
        requested = Resources(
            used.milli_cpu + promised.milli_cpu, used.memory + promised.memory, used.gpus + promised.gpus
        )
        fit = in_tree_score(node, requested, pod.requests)
        if fit > best_fit:
            best, best_fit = name, fit
    return best
