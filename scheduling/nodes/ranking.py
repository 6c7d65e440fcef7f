"""Prioritize: rank candidate nodes for one pod by GPU connectivity first, packing second.

Composition rule (docs/design/style.md §5): each candidate gets two integer scores 0..10,

- ``topology``: how good the best free GPU set of the node is for this pod, relative to the best set
  of that size the node has when empty (``scheduling.topology.node_topology_score``); 10 for one-GPU
  pods and for pods without GPUs; 5 (unknown) on nodes without a topology document;
- ``packing``: ``scheduling.gpu.binpack`` (fill busy nodes first, keep whole nodes free for big jobs);

and the node's score is ``(2 * topology + packing) // 3``: a set whose all-reduce runs at full NVLink
speed is worth more than packing, and packing decides among equally connected nodes. A pod with at most
one GPU has nothing to connect, so its score is ``packing`` alone, at full resolution (the blend would
round neighbouring packing levels together and let kube-scheduler's own scores spread the pods). Unknown
nodes and nodes the pod does not fit score 0. The result is an integer in 0..10
(``MaxExtenderPriority``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.usage import FreeGpus
from scheduling.gpu.binpack import packing_score
from scheduling.model import Node, Pod
from scheduling.topology import TopologyCache, node_topology_score

TOPOLOGY_WEIGHT = 2
PACKING_WEIGHT = 1
UNKNOWN_TOPOLOGY_SCORE = 5


MEMO_GPU_COUNTS = 32
"""Distinct GPU counts a :class:`ScoreMemo` keeps tables for (the least recently asked goes first)."""


class ScoreMemo:
    """Caller-owned memory of node scores, bounded whatever the requests ask (it must not grow for ever).

    One table per GPU count: node -> (free GPUs, node, score). An entry is used only while the node and
    its free GPUs are the very same objects, which the cache replaces whenever either changes, so a hit
    is exact. At most ``max_gpu_counts`` tables are kept, and a table that holds more than twice the
    cluster's nodes is trimmed to the nodes that still exist, so neither a stream of distinct GPU counts
    nor node churn grows it without end. Safe to share between request threads.
    """

    def __init__(self, max_gpu_counts: int = MEMO_GPU_COUNTS) -> None:
        self._max = max_gpu_counts
        self._tables: OrderedDict[int, dict[str, tuple[FreeGpus, Node, int]]] = OrderedDict()
        self._lock = threading.Lock()

    def table(self, need: int, nodes: Mapping[str, Node]) -> dict[str, tuple[FreeGpus, Node, int]]:
        """The table for pods that need ``need`` GPUs in a cluster of ``nodes`` (made when missing)."""
        with self._lock:
            table = self._tables.get(need)
            if table is None:
                table = self._tables[need] = {}
                while len(self._tables) > self._max:
                    self._tables.popitem(last=False)
            self._tables.move_to_end(need)
            if len(table) > 2 * len(nodes) + 16:
                # A fresh dict, not deletions: other threads may be writing to the old one.
                table = self._tables[need] = {k: v for k, v in list(table.items()) if k in nodes}
            return table

    def __len__(self) -> int:
        """How many GPU counts have a table."""
        return len(self._tables)

    def sizes(self) -> dict[int, int]:
        """Entries per GPU count, for tests and debugging."""
        with self._lock:
            return {need: len(table) for need, table in self._tables.items()}


def rank_nodes(
    pod: Pod,
    candidates: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    cache: TopologyCache,
    memo: ScoreMemo | None = None,
) -> tuple[tuple[str, int], ...]:
    """Score every distinct candidate 0..10 for ``pod``, in request order."""
    need = pod.requests.gpus
    ranked: list[tuple[str, int]] = []
    node_of, base_free_of, promised_on = snapshot.nodes.get, snapshot.base_free.get, promises.by_node.get
    table = None if memo is None else memo.table(need, snapshot.nodes)
    for name in dict.fromkeys(candidates):
        node = node_of(name)
        if node is None:
            ranked.append((name, 0))
            continue
        # snapshot.free_on, inlined for the common case: nothing promised on the node.
        free = base_free_of(name) if not promised_on(name) else None
        if free is None:
            free = snapshot.free_on(name, promises)
        if free is None or free.count < need:
            ranked.append((name, 0))
            continue
        if table is not None:
            hit = table.get(name)
            if hit is not None and hit[0] is free and hit[1] is node:
                ranked.append((name, hit[2]))
                continue
        score = _score(node, free, need, cache)
        if table is not None:
            table[name] = (free, node, score)
        ranked.append((name, score))
    return tuple(ranked)


def _score(node: Node, free: FreeGpus, need: int, cache: TopologyCache) -> int:
    packing = packing_score(node, free, need)
    if need <= 1:
        return packing
    if node.topology is None:
        topology = UNKNOWN_TOPOLOGY_SCORE
    else:
        topology = node_topology_score(node.topology, free.indices, need, cache=cache)
    return (TOPOLOGY_WEIGHT * topology + PACKING_WEIGHT * packing) // (TOPOLOGY_WEIGHT + PACKING_WEIGHT)
