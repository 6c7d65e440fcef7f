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

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.usage import NodeGpuUsage
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
    ties: TieMemo | None = None,
) -> str | None:
    """The node to answer ``filter`` with alone, or ``None`` when there is nothing to choose between.

    Args:
        pod: a pod whose placement phalanx decides fully (the driver checked).
        feasible: the nodes filter found feasible for it.
        snapshot: the cluster view the filter read.
        promises: the promise book the filter read.
        topologies: the topology cache ``prioritize`` uses.
        memo: the score memo ``prioritize`` uses (same answer without it).
        ties: the tie-break memo (same answer without it).

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
    tied = [name for name, score in scores if score == top]
    if len(tied) == 1:
        return tied[0]
    table = (ties or TieMemo()).table(pod.requests, snapshot.nodes)
    node_of, usage_of, promised_on = snapshot.nodes.get, snapshot.usage.get, promises.by_node.get
    best, best_fit = "", -1
    for name in tied:  # one pass: the highest in-tree score, and the smallest name among equals
        node = node_of(name)
        if node is None:
            continue
        usage = usage_of(name)
        if promised_on(name):
            fit = _tie_score(node, snapshot.usage_of(name).requested, promises.requested_on(name), pod)
        else:
            hit = table.get(name)
            if hit is not None and hit[0] is node and hit[1] is usage:
                fit = hit[2]
            else:
                used = usage.requested if usage is not None else Resources()
                fit = _tie_score(node, used, Resources(), pod)
                table[name] = (node, usage, fit)
        if fit > best_fit or (fit == best_fit and name < best):
            best, best_fit = name, fit
    return best or None


def _tie_score(node: Node, used: Resources, promised: Resources, pod: Pod) -> int:
    requested = Resources(
        used.milli_cpu + promised.milli_cpu, used.memory + promised.memory, used.gpus + promised.gpus
    )
    return in_tree_score(node, requested, pod.requests)


MEMO_SHAPES = 32
"""Distinct pod request shapes a :class:`TieMemo` keeps tables for (the least recently asked goes first)."""


class TieMemo:
    """Caller-owned memory of ``in_tree_score`` per node, per pod request shape (as ``ScoreMemo`` is).

    An entry is used only while the node and its usage are the very objects the cache holds (it replaces
    them whenever either changes) and nothing is promised on the node, so a hit is exact. On a cluster
    of alike nodes every node ties at the top of phalanx's score, and without it each decision would
    score them all again (51 ms at 5,000 empty nodes). Bounded as ``ScoreMemo`` is; safe to share
    between request threads.
    """

    def __init__(self, max_shapes: int = MEMO_SHAPES) -> None:
        self._max = max_shapes
        self._tables: OrderedDict[Resources, dict[str, tuple[Node, NodeGpuUsage | None, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def table(
        self, shape: Resources, nodes: Mapping[str, Node]
    ) -> dict[str, tuple[Node, NodeGpuUsage | None, int]]:
        """The table for pods requesting ``shape`` in a cluster of ``nodes`` (made when missing)."""
        with self._lock:
            table = self._tables.get(shape)
            if table is None:
                table = self._tables[shape] = {}
                while len(self._tables) > self._max:
                    self._tables.popitem(last=False)
            self._tables.move_to_end(shape)
            if len(table) > 2 * len(nodes) + 16:
                table = self._tables[shape] = {k: v for k, v in list(table.items()) if k in nodes}
            return table
