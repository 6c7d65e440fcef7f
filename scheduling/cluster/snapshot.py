"""One immutable view of the whole cluster per decision (docs/design/style.md §2).

``scheduling.cluster.state.ClusterState`` keeps nodes, pods, PodGroups, Queues and the per-node GPU usage up
to date one change at a time and hands out a snapshot of all of it in constant time (persistent maps). A
decision reads one snapshot and nothing else, so it can be saved and replayed
(``scheduling.offline.replay``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TypeVar

from scheduling.cluster.change_log import ChangeLog
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.queue_specs import Queue
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.usage import EMPTY_USAGE, FreeGpus, NodeGpuUsage, free_gpus
from scheduling.model import Node, Pod, PodGroup, Resources
from scheduling.resources import minus, node_room, total

_NO_UIDS: frozenset[str] = frozenset()
_V = TypeVar("_V")


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The cluster at one moment: nodes, their GPU usage, pods, PodGroups and Queues.

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
        pods: pod UID -> pod, every pod the driver keeps (the extender: live ones only).
        pod_uids: ``namespace/name`` -> UID.
        member_uids: PodGroup ``namespace/name`` -> UIDs of the pods labelled into it.
        groups: PodGroup ``namespace/name`` -> PodGroup.
        queues: Queue name -> Queue (as written; validated into a tree by the queue view).
        queue_pods: pod UID -> pod for the pods the queue rules walk (``Pod.in_queues``), kept by the
            cache so that the queue view and the release pass walk these instead of every pod (150,000
            pods of other schedulers, or finished ones, cost them nothing); ``None``: filter ``pods``.
        unbound_pods: the same for those of them neither bound nor being deleted (a release pass's
            gated and in-flight pods), kept with ``queue_pods``; ``None``: filter ``queue_pods``.
        elsewhere: the requests of the live, bound pods not in ``queue_pods``, summed (what they take
            from every queue's capacity), kept as a running total with ``queue_pods``; ``None``: walk.
        open_rooms: node name -> its room before promises (``scheduling.cluster.room.open_room``; ``None``
            for a node that takes no pods), kept per node by the state; ``None``: built per look.
        changes: the state's log of which nodes each version changed (``ChangeLog.since``), for
            indexes kept per change; ``None``: unknown (a hand-built snapshot), such an index rebuilds.
        pod_changes: the state's log of which pods of ``queue_pods`` each version added, changed or
            removed, by UID, for the queue view kept per change; ``None``: unknown, the view walks them.
            It never names ``arrivals``.
        arrivals: the pods ``with_pods`` added (the caller knows of them, the cache has not seen them
            yet), which an index kept from ``pod_changes`` lays over its answer.
    """

    nodes: Mapping[str, Node] = field(default_factory=lambda: MappingProxyType({}))
    usage: Mapping[str, NodeGpuUsage] = field(default_factory=lambda: MappingProxyType({}))
    version: int = 0
    base_free: Mapping[str, FreeGpus] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    room_total: Resources | None = field(default=None, compare=False)
    pods: Mapping[str, Pod] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    pod_uids: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    member_uids: Mapping[str, frozenset[str]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )
    groups: Mapping[str, PodGroup] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    queues: Mapping[str, Queue] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    queue_pods: Mapping[str, Pod] | None = field(default=None, compare=False)
    unbound_pods: Mapping[str, Pod] | None = field(default=None, compare=False)
    elsewhere: Resources | None = field(default=None, compare=False)
    open_rooms: Mapping[str, NodeRoom | None] | None = field(default=None, compare=False)
    changes: ChangeLog | None = field(default=None, compare=False, repr=False)
    pod_changes: ChangeLog | None = field(default=None, compare=False, repr=False)
    arrivals: tuple[Pod, ...] = field(default=(), compare=False, repr=False)

    def pod(self, namespace: str, name: str) -> Pod | None:
        """The pod ``namespace/name``, if known."""
        uid = self.pod_uids.get(f"{namespace}/{name}")
        return None if uid is None else self.pods.get(uid)

    def pod_by_uid(self, uid: str) -> Pod | None:
        """The pod with ``uid``, if known."""
        return self.pods.get(uid)

    def all_pods(self) -> list[Pod]:
        """Every pod, sorted by key (walks them all: not for the per-request path)."""
        return sorted(self.pods.values(), key=lambda p: p.key)

    def queue_pod_list(self) -> list[Pod]:
        """The pods the queue rules walk (``Pod.in_queues``), sorted by key, as ``all_pods`` sorts them."""
        if self.queue_pods is None:
            return [p for p in self.all_pods() if p.in_queues]
        return sorted(self.queue_pods.values(), key=lambda p: p.key)

    def unbound_queue_pods(self) -> list[Pod]:
        """The queue pods neither bound nor being deleted, sorted by key: what a release pass walks."""
        if self.unbound_pods is None:
            return [p for p in self.queue_pod_list() if p.node_name is None and not p.terminating]
        return sorted(self.unbound_pods.values(), key=lambda p: p.key)

    def held_elsewhere(self) -> Resources:
        """What the live, bound pods outside the queue rules hold, summed (see ``elsewhere``)."""
        if self.elsewhere is None:
            return total(p.requests for p in self.pods.values() if p.holds_resources and not p.in_queues)
        return self.elsewhere

    def members(self, key: str) -> list[Pod]:
        """The pods labelled into the PodGroup ``namespace/name``, sorted by name."""
        pods = self.pods
        return sorted(
            (pods[u] for u in self.member_uids.get(key, _NO_UIDS) if u in pods), key=lambda p: p.name
        )

    def podgroup(self, key: str) -> PodGroup | None:
        """The PodGroup ``namespace/name``, if it exists."""
        return self.groups.get(key)

    def podgroups(self) -> list[PodGroup]:
        """Every PodGroup, sorted by key."""
        return [self.groups[k] for k in sorted(self.groups)]

    def queue_list(self) -> list[Queue]:
        """Every Queue object, sorted by name."""
        return [self.queues[k] for k in sorted(self.queues)]

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


def total_room(
    nodes: Iterable[tuple[str, Node]], usage: Mapping[str, NodeGpuUsage], promises: PromiseBook
) -> Resources:
    """``node_room`` summed over ``nodes``, after live pods and promises: the walk ``room_total`` saves."""
    return total(
        node_room(node, usage.get(name, EMPTY_USAGE).requested, promises.requested_on(name))
        for name, node in nodes
    )


def with_pods(snapshot: ClusterSnapshot, pods: Sequence[Pod]) -> ClusterSnapshot:
    """``snapshot`` with ``pods`` added, unbound (pods the caller knows of and the cache has not seen yet).

    The admission gate's decisions count a pod from the moment its creation was answered, not from when
    the cache sees it, so a pod released as it is created holds its room in the decisions made before
    the cache catches up (``placement.release_pass``). Each pod must be unbound and in the queues
    (``Pod.in_queues``); the persistent maps of a cache's snapshot make this a few inserts.
    """
    if not pods:
        return snapshot
    added = {p.uid: p for p in pods}
    keys = {p.key: p.uid for p in pods}
    return replace(
        snapshot,
        pods=_merged(snapshot.pods, added),
        pod_uids=_merged(snapshot.pod_uids, keys),
        queue_pods=None if snapshot.queue_pods is None else _merged(snapshot.queue_pods, added),
        unbound_pods=None if snapshot.unbound_pods is None else _merged(snapshot.unbound_pods, added),
        arrivals=(*snapshot.arrivals, *pods),  # in no log: an index kept from it lays them over
    )


def _merged(base: Mapping[str, _V], added: Mapping[str, _V]) -> Mapping[str, _V]:
    """``base`` with ``added`` set: ``set`` on a persistent map (``immutables.Map``), else a copy."""
    setter = getattr(base, "set", None)
    if setter is None:
        return MappingProxyType({**base, **added})
    merged = base
    for key, value in added.items():
        merged = merged.set(key, value)  # type: ignore[attr-defined]
    return merged
