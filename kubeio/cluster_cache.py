"""The extender's informer-fed view of nodes and pods, kept incrementally.

Each watch event updates one node or one pod and recomputes the GPU usage of the nodes it touched, so a
request reads a ready snapshot instead of rebuilding the cluster view (issue: hot path). Terminal pods
are filtered out server-side: they hold nothing, and at 150,000 pods memory matters.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import TypeVar

from kubeio.convert import ConvertError, node_from_api, pod_from_api, podgroup_from_api
from kubeio.http import JsonObject, KubeHttp
from kubeio.queues import QUEUES_PATH, queue_from_api
from kubeio.reflector import Collection, Reflector
from scheduling.gpu_usage import EMPTY_USAGE, FreeGpus, NodeGpuUsage, free_gpus
from scheduling.model import Node, Pod, PodGroup, Resources
from scheduling.queues import Queue
from scheduling.queues.resources import minus, plus
from scheduling.snapshot import ClusterSnapshot, node_room
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)

PodListener = Callable[[Pod | None, Pod | None], None]
"""Called with (old, new) after a pod changed; ``new`` is ``None`` when it is gone."""

T = TypeVar("T")

PODGROUPS_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"

LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class ClusterCache:
    """Nodes, live pods and per-node GPU usage, fed by list/watch.

    Thread-safe. Listeners run on the watch thread after the cache lock is released, so a listener may
    read the cache, and a caller holding its own lock may read the cache without deadlock.
    """

    def __init__(self, topologies: TopologyCache | None = None, *, pods_selector: str = "") -> None:
        """Create an empty cache.

        Args:
            topologies: shared prepared topologies (a new cache if ``None``).
            pods_selector: field selector for pods; ``LIVE_PODS`` leaves finished pods out (the
                extender), empty keeps them (the placement manager counts succeeded and failed members).
        """
        self._pods_selector = pods_selector
        self.topologies = topologies or TopologyCache()
        """Prepared GPU topologies, shared by all nodes with the same document (and by the extender)."""
        self._lock = threading.Lock()
        self._nodes: dict[str, Node] = {}
        self._pods: dict[str, Pod] = {}
        self._uid_by_key: dict[str, str] = {}
        self._pods_on_node: dict[str, set[str]] = {}
        self._usage: dict[str, NodeGpuUsage] = {}
        self._free: dict[str, FreeGpus] = {}
        self._room: dict[str, Resources] = {}
        self._room_total = Resources()
        self._groups: dict[str, PodGroup] = {}
        self._queues: dict[str, Queue] = {}
        self._members: dict[str, set[str]] = {}
        self._version = 0
        self._snapshot: ClusterSnapshot | None = None
        self._listeners: list[PodListener] = []
        self._queue_listeners: list[Callable[[], None]] = []
        self._reflectors: list[Reflector] = []
        self._threads: list[threading.Thread] = []

    # -- reading -----------------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """The current nodes and GPU usage; the same object until the cache changes."""
        with self._lock:
            if self._snapshot is None:
                self._snapshot = ClusterSnapshot(
                    MappingProxyType(dict(self._nodes)),
                    MappingProxyType(dict(self._usage)),
                    self._version,
                    MappingProxyType(dict(self._free)),
                    self._room_total,
                )
            return self._snapshot

    def pod(self, namespace: str, name: str) -> Pod | None:
        """The live pod ``namespace/name``, if the cache has it."""
        with self._lock:
            uid = self._uid_by_key.get(f"{namespace}/{name}")
            return None if uid is None else self._pods.get(uid)

    def pod_by_uid(self, uid: str) -> Pod | None:
        """The live pod with ``uid``, if the cache has it."""
        with self._lock:
            return self._pods.get(uid)

    @property
    def version(self) -> int:
        """A counter that grows with every change of nodes or pods."""
        return self._version

    def pods(self) -> list[Pod]:
        """All live pods, sorted by key (for status pages and tests; not for the hot path)."""
        with self._lock:
            return sorted(self._pods.values(), key=lambda p: p.key)

    def podgroup(self, key: str) -> PodGroup | None:
        """The PodGroup ``namespace/name``, if it exists."""
        with self._lock:
            return self._groups.get(key)

    def podgroups(self) -> list[PodGroup]:
        """Every PodGroup, sorted by key."""
        with self._lock:
            return [self._groups[k] for k in sorted(self._groups)]

    def queues(self) -> list[Queue]:
        """Every Queue object, sorted by name (not yet validated as a tree)."""
        with self._lock:
            return [self._queues[k] for k in sorted(self._queues)]

    def members(self, key: str) -> list[Pod]:
        """The live pods labelled into the PodGroup ``namespace/name``, sorted by name."""
        with self._lock:
            return sorted((self._pods[u] for u in self._members.get(key, ())), key=lambda p: p.name)

    def add_listener(self, listener: PodListener) -> None:
        """Call ``listener(old, new)`` after every pod change."""
        self._listeners.append(listener)

    def add_queue_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after a Queue is added, deleted or its spec changes (not on status writes)."""
        self._queue_listeners.append(listener)

    @property
    def synced(self) -> bool:
        """Whether nodes, pods and PodGroups have all been listed at least once."""
        return bool(self._reflectors) and all(r.synced.is_set() for r in self._reflectors)

    # -- feeding -----------------------------------------------------------------------------------

    def replace_nodes(self, items: Iterable[JsonObject]) -> None:
        """Replace every node with a fresh list."""
        nodes = {}
        for raw in items:
            node = _convert(self._node, raw)
            if node is not None:
                nodes[node.name] = node
        with self._lock:
            self._nodes = nodes
            self._free = {name: self._free_of(name) for name in nodes}
            self._recount_room()
            self._changed()

    def node_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one node watch event."""
        node = _convert(self._node, raw)
        if node is None:
            return
        with self._lock:
            if kind == "DELETED":
                self._nodes.pop(node.name, None)
                self._free.pop(node.name, None)
            else:
                self._nodes[node.name] = node
                self._free[node.name] = self._free_of(node.name)
            self._update_room(node.name)
            self._changed()

    def replace_pods(self, items: Iterable[JsonObject]) -> None:
        """Replace every pod with a fresh list, then tell listeners what changed."""
        fresh: dict[str, Pod] = {}
        for raw in items:
            pod = _convert(pod_from_api, raw)
            if pod is not None:
                fresh[pod.uid] = pod
        with self._lock:
            old = self._pods
            self._pods = fresh
            self._uid_by_key = {pod.key: uid for uid, pod in fresh.items()}
            self._pods_on_node = {}
            self._members = {}
            for uid, pod in fresh.items():
                if pod.node_name:
                    self._pods_on_node.setdefault(pod.node_name, set()).add(uid)
                if pod.group_key:
                    self._members.setdefault(pod.group_key, set()).add(uid)
            self._usage = {
                node: NodeGpuUsage.of_pods(fresh[uid] for uid in uids)
                for node, uids in self._pods_on_node.items()
            }
            self._free = {name: self._free_of(name) for name in self._nodes}
            self._recount_room()
            self._changed()
        changes = [(old.get(uid), fresh.get(uid)) for uid in sorted(old.keys() | fresh.keys())]
        self._notify([(a, b) for a, b in changes if a != b])

    def pod_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one pod watch event."""
        pod = _convert(pod_from_api, raw)
        if pod is None:
            return
        with self._lock:
            old = self._pods.get(pod.uid)
            new = None if kind == "DELETED" else pod
            self._put(pod.uid, old, new)
            self._changed()
        self._notify([(old, new)])

    def _free_of(self, name: str) -> FreeGpus:
        return free_gpus(self._nodes[name], self._usage.get(name, EMPTY_USAGE), frozenset())

    def _room_of(self, name: str) -> Resources | None:
        node = self._nodes.get(name)
        return None if node is None else node_room(node, self._usage.get(name, EMPTY_USAGE).requested)

    def _update_room(self, name: str) -> None:
        """Keep ``_room_total`` equal to the sum of every node's room, one node at a time."""
        before, after = self._room.pop(name, None), self._room_of(name)
        if before is not None:
            self._room_total = minus(self._room_total, before)
        if after is not None:
            self._room[name] = after
            self._room_total = plus(self._room_total, after)

    def _recount_room(self) -> None:
        self._room, self._room_total = {}, Resources()
        for name in self._nodes:
            self._update_room(name)

    def _node(self, raw: object) -> Node:
        node = node_from_api(raw, self.topologies)
        if node.topology_problem:
            log.warning("node %s: %s", node.name, node.topology_problem)
        return node

    def _put(self, uid: str, old: Pod | None, new: Pod | None) -> None:
        touched: set[str] = set()
        if old is not None:
            self._uid_by_key.pop(old.key, None)
            if old.group_key:
                self._members.get(old.group_key, set()).discard(uid)
            if old.node_name:
                self._pods_on_node.get(old.node_name, set()).discard(uid)
                touched.add(old.node_name)
            del self._pods[uid]
        if new is not None:
            self._pods[uid] = new
            self._uid_by_key[new.key] = uid
            if new.group_key:
                self._members.setdefault(new.group_key, set()).add(uid)
            if new.node_name:
                self._pods_on_node.setdefault(new.node_name, set()).add(uid)
                touched.add(new.node_name)
        for node in touched:
            uids = self._pods_on_node.get(node, set())
            if uids:
                self._usage[node] = NodeGpuUsage.of_pods(self._pods[u] for u in uids)
            else:
                self._pods_on_node.pop(node, None)
                self._usage.pop(node, None)
            if node in self._nodes:
                self._free[node] = self._free_of(node)
            self._update_room(node)

    def replace_podgroups(self, items: Iterable[JsonObject]) -> None:
        """Replace every PodGroup with a fresh list."""
        groups = {}
        for raw in items:
            group = _convert(podgroup_from_api, raw)
            if group is not None:
                groups[group.key] = group
        with self._lock:
            self._groups = groups

    def podgroup_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one PodGroup watch event."""
        group = _convert(podgroup_from_api, raw)
        if group is None:
            return
        with self._lock:
            if kind == "DELETED":
                self._groups.pop(group.key, None)
            else:
                self._groups[group.key] = group

    def replace_queues(self, items: Iterable[JsonObject]) -> None:
        """Replace every Queue with a fresh list."""
        queues = {}
        for raw in items:
            queue = _convert(queue_from_api, raw)
            if queue is not None:
                queues[queue.name] = queue
        with self._lock:
            changed = queues != self._queues
            self._queues = queues
            if changed:
                self._changed()
        if changed:
            self._notify_queues()

    def queue_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one Queue watch event; a status-only update (the placement manager's) changes nothing."""
        queue = _convert(queue_from_api, raw)
        if queue is None:
            return
        with self._lock:
            before = self._queues.get(queue.name)
            if kind == "DELETED":
                changed = self._queues.pop(queue.name, None) is not None
            else:
                changed = before != queue
                self._queues[queue.name] = queue
            if changed:
                self._changed()
        if changed:
            self._notify_queues()

    def _changed(self) -> None:
        self._version += 1
        self._snapshot = None

    def _notify_queues(self) -> None:
        for listener in self._queue_listeners:
            listener()

    def _notify(self, changes: list[tuple[Pod | None, Pod | None]]) -> None:
        for old, new in changes:
            for listener in self._listeners:
                listener(old, new)

    # -- running -----------------------------------------------------------------------------------

    def start(self, http: KubeHttp, stop: threading.Event) -> None:
        """Start watching nodes and live pods in daemon threads."""
        self._reflectors = [
            Reflector(
                http,
                Collection("/api/v1/nodes"),
                on_replace=self.replace_nodes,
                on_event=self.node_event,
                stop=stop,
            ),
            Reflector(
                http,
                Collection("/api/v1/pods", field_selector=self._pods_selector),
                on_replace=self.replace_pods,
                on_event=self.pod_event,
                stop=stop,
            ),
            Reflector(
                http,
                Collection(PODGROUPS_PATH, optional=True),
                on_replace=self.replace_podgroups,
                on_event=self.podgroup_event,
                stop=stop,
            ),
            Reflector(
                http,
                Collection(QUEUES_PATH, optional=True),
                on_replace=self.replace_queues,
                on_event=self.queue_event,
                stop=stop,
            ),
        ]
        for reflector, name in zip(self._reflectors, ("nodes", "pods", "podgroups", "queues"), strict=True):
            thread = threading.Thread(target=reflector.run, name=f"watch-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def wait_synced(self, timeout: float) -> bool:
        """Block until both collections are listed, or ``timeout`` seconds pass."""
        return all(r.synced.wait(timeout) for r in self._reflectors)


def _convert(convert: Callable[[object], T], raw: JsonObject) -> T | None:
    try:
        return convert(raw)
    except ConvertError as exc:
        name = (raw.get("metadata") or {}).get("name", "?")
        log.warning("ignoring object %s that phalanx cannot read: %s", name, exc)
        return None
