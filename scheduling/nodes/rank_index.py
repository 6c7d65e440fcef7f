"""The decisive choice in O(changed nodes): every node kept in phalanx's order, per GPU need and pod shape.

``scheduling.nodes.decisive.decisive_node`` filters and ranks every candidate for every pod: a few
milliseconds at 5,000 candidates, most of it for nodes nothing changed since the last pod. This index
keeps, per (GPUs needed, pod requests), every node that could take such a pod with nothing promised on
it, sorted by the decisive order: phalanx's score (``scheduling.nodes.ranking``) highest first, then the
in-tree tie-break (``decisive.in_tree_score``), then the name. Between two decisions it looks again only
at the nodes the cluster state changed (``ClusterSnapshot.changes``), and a decision walks the order
and stops at the first node kube-scheduler offered. Nodes with promises (binds in flight, a gang's
reservation) are few and change with every bind, so they are judged directly, exactly as filter and
``decisive_node`` judge them, and compared with the walk's first hit.

The answer is the decisive node among the feasible candidates, or ``None`` when none is feasible (the
driver then runs the full filter, which gives every node's reason): the same node ``decisive_node``
picks from the full filter's feasible list, and the one node that list holds when it holds one
(``tests/scheduling/nodes/test_rank_index.py`` compares them over random change sequences).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from scheduling.cluster.change_log import ChangeLog
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gpu.fit import filter_nodes
from scheduling.keyed_order import place
from scheduling.model import Pod, Resources
from scheduling.nodes.decisive import in_tree_score
from scheduling.nodes.ranking import ScoreMemo, rank_nodes
from scheduling.nodes.readiness import split_candidates
from scheduling.topology import TopologyCache

Key = tuple[int, int, str]
"""(-phalanx score, -in-tree score, name): ascending is the decisive order."""

MAX_SHAPES = 16
"""(GPU need, pod requests) pairs an index keeps an order for (the least recently asked goes first)."""

_EMPTY = PromiseBook()


@dataclass
class _Order:
    version: int
    changes: ChangeLog
    keys: dict[str, Key] = field(default_factory=dict)
    order: list[Key] = field(default_factory=list)


class NotIndexed(Exception):  # noqa: N818 - a signal to the caller, not an error it reports
    """The index cannot answer for this snapshot (no change log, or older than the index); decide in full."""


FEW_CANDIDATES = 8
"""Candidates at most for which ``choose`` reads each one's key rather than walking the order: the
first of the order among them is the smallest of their keys. kube-scheduler asks about one node when it
tries a pod's nominated node (``kubeio.nominations``); the walk to it crossed half the nodes."""


class RankIndex:
    """Per (GPU need, pod requests), every node that could take such a pod, in the decisive order.

    Caller-owned and shared by request threads (one lock); memory is one key per node per kept shape.
    """

    def __init__(self, max_shapes: int = MAX_SHAPES) -> None:
        self._max = max_shapes
        self._orders: OrderedDict[tuple[int, Resources], _Order] = OrderedDict()
        self._lock = threading.Lock()

    def choose(
        self,
        pod: Pod,
        candidates: AbstractSet[str],
        snapshot: ClusterSnapshot,
        promises: PromiseBook,
        topologies: TopologyCache,
        memo: ScoreMemo | None = None,
    ) -> str | None:
        """The decisive node among ``candidates`` for ``pod``, or ``None`` when no candidate is feasible.

        Raises:
            NotIndexed: the snapshot carries no change log, or is older than what the index has seen;
                the caller decides without the index.
        """
        if pod.requests.gpus < 1 or snapshot.changes is None:
            raise NotIndexed
        shape = (pod.requests.gpus, pod.requests)
        with self._lock:
            order = self._current(shape, pod, snapshot, topologies, memo)
            promised = set(promises.by_node)
            best: Key | None = None
            if len(candidates) <= FEW_CANDIDATES:  # a nominated or hinted node: look it up, walk nothing
                keys = [k for n in candidates if n not in promised and (k := order.keys.get(n)) is not None]
                best = min(keys, default=None)
            else:
                for key in order.order:
                    name = key[2]
                    if name in candidates and name not in promised:
                        best = key
                        break
        for name in sorted(n for n in promised if n in candidates):
            judged = _key(name, pod, snapshot, promises, topologies, memo)
            if judged is not None and (best is None or judged < best):
                best = judged
        return None if best is None else best[2]

    def _current(
        self,
        shape: tuple[int, Resources],
        pod: Pod,
        snapshot: ClusterSnapshot,
        topologies: TopologyCache,
        memo: ScoreMemo | None,
    ) -> _Order:
        changes = snapshot.changes
        assert changes is not None  # checked by the caller
        order = self._orders.get(shape)
        if order is not None:
            self._orders.move_to_end(shape)
            if order.changes is changes and order.version > snapshot.version:
                raise NotIndexed
            changed = changes.since(order.version, snapshot.version) if order.changes is changes else None
            if changed is not None:
                for name in changed:
                    place(order.keys, order.order, name, _key(name, pod, snapshot, _EMPTY, topologies, memo))
                order.version = snapshot.version
                return order
        fresh = _Order(snapshot.version, changes)
        for name in snapshot.nodes:
            key = _key(name, pod, snapshot, _EMPTY, topologies, memo)
            if key is not None:
                fresh.keys[name] = key
        fresh.order = sorted(fresh.keys.values())
        self._orders[shape] = fresh
        while len(self._orders) > self._max:
            self._orders.popitem(last=False)
        return fresh


def _key(
    name: str,
    pod: Pod,
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    topologies: TopologyCache,
    memo: ScoreMemo | None,
) -> Key | None:
    """Node ``name``'s place in the decisive order for ``pod``, or ``None`` when filter turns it down.

    The same judges as the full path: node health (``split_candidates``), the fit (``filter_nodes``),
    phalanx's score (``rank_nodes``) and the tie-break with what is promised on the node.
    """
    healthy, _ = split_candidates((name,), snapshot.nodes)
    if not healthy or not filter_nodes(pod, healthy, snapshot, promises).feasible:
        return None
    ((_, score),) = rank_nodes(pod, healthy, snapshot, promises, topologies, memo)
    node = snapshot.nodes[name]
    used, promised = snapshot.usage_of(name).requested, promises.requested_on(name)
    requested = Resources(
        used.milli_cpu + promised.milli_cpu, used.memory + promised.memory, used.gpus + promised.gpus
    )
    return (-score, -in_tree_score(node, requested, pod.requests), name)
