"""The watches that feed the core's ``ClusterState``: nodes, pods, PodGroups (both kinds) and Queues.

The accounting (GPU usage, free GPUs, room) is the core's (``scheduling.cluster.state``), so a simulator or a
replay keeps the cluster exactly as the extender does; this module only converts API objects, applies
them under a lock, and tells listeners. Terminal pods are filtered out server-side for the extender:
they hold nothing, and at 150,000 pods memory matters.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import ParamSpec, TypeVar

from kubeio.convert import ConvertError, PlanCheck, node_from_api, pod_from_api, podgroup_from_api
from kubeio.http import JsonObject, KubeHttp
from kubeio.native_podgroups import NATIVE_PODGROUPS_PATH, native_podgroup_from_api
from kubeio.queue_objects import QUEUES_PATH, queue_from_api
from kubeio.reflector import Collection, Reflector
from kubeio.refusals import Refusal, RefusalBook, identity, object_key, refusal_of
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import ClusterState
from scheduling.model import Node, Pod, PodGroup
from scheduling.queues import Queue
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)

PodListener = Callable[[Pod | None, Pod | None], None]
"""Called with (old, new) after a pod changed; ``new`` is ``None`` when it is gone."""

NodeListener = Callable[[str, Node | None, Node | None], None]
"""Called with (name, old, new) after a node changed; ``new`` is ``None`` when it is gone."""

T = TypeVar("T")
P = ParamSpec("P")

PODGROUPS_PATH = "/apis/scheduling.x-k8s.io/v1alpha1/podgroups"

LIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"

NATIVE_PODGROUP = "PodGroup.scheduling.k8s.io"
"""The refusal kind of a ``scheduling.k8s.io`` PodGroup (``kubeio.refusals``), apart from the
scheduler-plugins ``PodGroup`` of the same name."""


class ClusterCache:
    """The core's ``ClusterState`` fed by list/watch, with listeners.

    Thread-safe: changes are applied under one lock; readers take the current snapshot (an immutable
    value) without waiting for writers. Listeners run on the watch thread after the lock is released,
    so a listener may read the cache, and a caller holding its own lock may read it without deadlock.
    """

    def __init__(
        self,
        topologies: TopologyCache | None = None,
        *,
        pods_selector: str = "",
        settle: Callable[[], None] = lambda: None,
        plan_check: PlanCheck | None = None,
    ) -> None:
        """Create an empty cache.

        Args:
            topologies: shared prepared topologies (a new cache if ``None``).
            pods_selector: field selector for pods; ``LIVE_PODS`` leaves finished pods out (the
                extender), empty keeps them (the placement manager counts succeeded and failed members).
            settle: called on the watch thread after every list or event the watches apply, after the
                listeners (the extender's ``kubeio.collector.Collector.settle``: what a change copied
                is frozen at once, so no collection a decision triggers walks it).
            plan_check: with plans carried on pods, the plans to believe (``kubeio.convert.pod_from_api``).
        """
        self._pod: Callable[[JsonObject], Pod] = partial(pod_from_api, plan_check=plan_check)
        self._pods_selector = pods_selector
        self._settle = settle
        self.topologies = topologies or TopologyCache()
        """Prepared GPU topologies, shared by all nodes with the same document (and by the extender)."""
        self._lock = threading.Lock()
        self._state = ClusterState()
        self._listeners: list[PodListener] = []
        self._node_listeners: list[NodeListener] = []
        self._nodes_listed = False
        self._queue_listeners: list[Callable[[], None]] = []
        self._reflectors: list[Reflector] = []
        self._threads: list[threading.Thread] = []
        self.refusals = RefusalBook()
        """The objects refused now, each with its reason (``kubeio.refusals``)."""

    # -- reading -----------------------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """The whole cluster now; the same object until the cache changes."""
        with self._lock:
            return self._state.snapshot()

    @property
    def version(self) -> int:
        """A counter that grows with every change of nodes, pods or Queue specs."""
        return self._state.version

    def pods(self) -> list[Pod]:
        """All pods, sorted by key (for status passes and tests; not for the hot path)."""
        return self.snapshot().all_pods()

    def podgroups(self) -> list[PodGroup]:
        """Every PodGroup, sorted by key."""
        return self.snapshot().podgroups()

    def queues(self) -> list[Queue]:
        """Every Queue object, sorted by name (not yet validated as a tree)."""
        return self.snapshot().queue_list()

    def is_native_group(self, key: str) -> bool:
        """Whether the gang ``namespace/name`` is declared by a ``scheduling.k8s.io`` PodGroup."""
        group = self.snapshot().podgroup(key)
        return group is not None and group.native

    def members(self, key: str) -> list[Pod]:
        """The pods labelled into the PodGroup ``namespace/name``, sorted by name."""
        return self.snapshot().members(key)

    def nodes(self) -> Mapping[str, Node] | None:
        """Every node by name, or ``None`` until the node watch has listed them once."""
        return self.snapshot().nodes if self._nodes_listed else None

    def nodes_listed(self) -> bool:
        """Whether the node watch has listed nodes once (until then no node looks deleted)."""
        return self._nodes_listed

    def add_node_listener(self, listener: NodeListener) -> None:
        """Call ``listener(name, old, new)`` after a node changed; ``new`` is ``None`` when it is gone."""
        self._node_listeners.append(listener)

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
    #
    # Each object is converted on its own (``_read``): one that cannot be read is refused (logged once,
    # kept in ``refusals`` for an event on it) and never stops the others or the watch. A refused object
    # that was readable before keeps its last readable version: forgetting a node would make its pods
    # lost, forgetting a pod would free GPUs it still holds. A DELETED event removes the object by its
    # identity, whether or not its last state can be read, so a deleted object always leaves the cache.

    def replace_nodes(self, items: Iterable[JsonObject]) -> None:
        """Replace every node with a fresh list, then tell node listeners what changed."""
        read = [(raw, self._read("Node", self._node, raw)) for raw in items]
        refused = {r.key: r for raw, node in read if (r := self._node_refusal(raw, node)) is not None}
        with self._lock:
            nodes = [n for raw, node in read if (n := node or self._state.node(identity(raw)[1])) is not None]
            before = {name: self._state.node(name) for name in self._state.node_names()}
            self._state.replace_nodes(nodes)
            self._nodes_listed = True
        self.refusals.replace("Node", refused)
        after = {node.name: node for node in nodes}
        for name in sorted(before.keys() | after.keys()):
            old, new = before.get(name), after.get(name)
            if old != new:
                self._notify_nodes(name, old, new)

    def node_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one node watch event, then tell node listeners."""
        if kind == "DELETED":
            name = identity(raw)[1]
            with self._lock:
                old = self._state.node(name)
                if old is not None:
                    self._state.remove_node(name)
            self.refusals.clear("Node", name)
            if old is not None:
                self._notify_nodes(name, old, None)
            return
        node = self._read("Node", self._node, raw)
        self._node_refusal(raw, node)
        if node is None:
            return
        with self._lock:
            old = self._state.node(node.name)
            self._state.put_node(node)
        self._notify_nodes(node.name, old, node)

    def _node_refusal(self, raw: JsonObject, node: Node | None) -> Refusal | None:
        """A node read with a GPU count phalanx does not model is refused too (kept, with no GPUs)."""
        if node is None:
            return self._standing("Node", raw)
        if node.gpu_problem is None:
            self.refusals.clear("Node", node.name)
            return None
        refusal = refusal_of("Node", raw, node.gpu_problem)
        if self.refusals.refuse(refusal):
            log.warning("%s", node.gpu_problem)
        return refusal

    def replace_pods(self, items: Iterable[JsonObject]) -> None:
        """Replace every pod with a fresh list, then tell listeners what changed."""
        read = [(raw, self._read("Pod", self._pod, raw)) for raw in items]
        refused = {r.key: r for raw, pod in read if pod is None and (r := self._standing("Pod", raw))}
        with self._lock:
            pods = [p for raw, pod in read if (p := pod or self._state.pod(identity(raw)[2])) is not None]
            changes = self._state.replace_pods(pods)
        self.refusals.replace("Pod", refused)
        self._notify(changes)

    def pod_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one pod watch event."""
        if kind == "DELETED":
            with self._lock:
                old = self._state.remove_pod(identity(raw)[2])
            self.refusals.clear("Pod", object_key(raw))
            self._notify([(old, None)])
            return
        pod = self._read("Pod", self._pod, raw)
        if pod is None:
            return
        self.refusals.clear("Pod", pod.key)
        with self._lock:
            old = self._state.put_pod(pod)
        self._notify([(old, pod)])

    # Both kinds of PodGroup share one key space (``namespace/name``), as their members do. A name taken
    # by both is ambiguous; the scheduler-plugins group keeps it (it came first in phalanx), the native
    # one is refused with the reason, and every other group is unaffected.

    def replace_podgroups(self, items: Iterable[JsonObject]) -> None:
        """Replace every scheduler-plugins PodGroup with a fresh list."""
        self._replace_groups(items, native=False)

    def podgroup_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one scheduler-plugins PodGroup watch event."""
        self._group_event(kind, raw, native=False)

    def replace_native_podgroups(self, items: Iterable[JsonObject]) -> None:
        """Replace every ``scheduling.k8s.io`` PodGroup with a fresh list."""
        self._replace_groups(items, native=True)

    def native_podgroup_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one ``scheduling.k8s.io`` PodGroup watch event."""
        self._group_event(kind, raw, native=True)

    def _replace_groups(self, items: Iterable[JsonObject], *, native: bool) -> None:
        kind, convert = _group_kind(native)
        read = [(raw, self._read(kind, convert, raw)) for raw in items]
        refused = {r.key: r for raw, g in read if g is None and (r := self._standing(kind, raw))}
        with self._lock:
            fresh = [g for raw, group in read if (g := group or self._old_group(raw, native)) is not None]
            others = {g.key: g for g in self._state.snapshot().podgroups() if g.native != native}
            if native:
                clash = [g for g in fresh if g.key in others]
                fresh = [g for g in fresh if g.key not in others]
            else:
                clash = [g for key, g in others.items() if any(f.key == key for f in fresh)]
                others = {k: g for k, g in others.items() if all(f.key != k for f in fresh)}
            self._state.replace_groups([*others.values(), *fresh])
        self.refusals.replace(kind, refused)
        for group in clash:
            self._refuse_clash(group)

    def _group_event(self, kind_: str, raw: JsonObject, *, native: bool) -> None:
        kind, convert = _group_kind(native)
        if kind_ == "DELETED":
            key = object_key(raw)
            with self._lock:
                held = self._state.group(key)
                if held is not None and held.native == native:
                    self._state.remove_group(key)
            self.refusals.clear(kind, key)
            return
        group = self._read(kind, convert, raw)
        if group is None:
            return
        with self._lock:
            held = self._state.group(group.key)
            clash = held is not None and held.native != native
            if not (clash and native):
                self._state.put_group(group)
        if clash:
            self._refuse_clash(group if native else held)  # type: ignore[arg-type]
            if native:
                return
        self.refusals.clear(kind, group.key)

    def _refuse_clash(self, group: PodGroup) -> None:
        reason = (
            f"a scheduler-plugins PodGroup {group.key} exists too, and phalanx cannot tell two gangs of one "
            "name apart: the scheduler-plugins one is used; rename one of them"
        )
        raw = {"metadata": {"namespace": group.namespace, "name": group.name, "uid": group.uid}}
        if self.refusals.refuse(refusal_of(NATIVE_PODGROUP, raw, reason)):
            log.warning("refusing PodGroup.scheduling.k8s.io %s: %s", group.key, reason)

    def replace_queues(self, items: Iterable[JsonObject]) -> None:
        """Replace every Queue with a fresh list (a Queue phalanx cannot read comes as a refused marker)."""
        read = [(raw, self._read("Queue", queue_from_api, raw)) for raw in items]
        refused = {r.key: r for raw, queue in read if queue is None and (r := self._standing("Queue", raw))}
        with self._lock:
            changed = self._state.replace_queues([q for _, q in read if q is not None])
        self.refusals.replace("Queue", refused)
        if changed:
            self._notify_queues()

    def queue_event(self, kind: str, raw: JsonObject) -> None:
        """Apply one Queue watch event; a status-only update (the placement manager's) changes nothing."""
        name = identity(raw)[1]
        if kind == "DELETED":
            with self._lock:
                changed = self._state.remove_queue(name)
            self.refusals.clear("Queue", name)
        else:
            queue = self._read("Queue", queue_from_api, raw)
            if queue is None:
                return
            self.refusals.clear("Queue", name)
            with self._lock:
                changed = self._state.put_queue(queue)
        if changed:
            self._notify_queues()

    def _read(self, kind: str, convert: Callable[[JsonObject], T], raw: JsonObject) -> T | None:
        """Convert one object, or refuse it (``None``) with the reason, logged when it is new."""
        try:
            return convert(raw)
        except ConvertError as exc:
            reason = str(exc)
        except Exception as exc:  # any fault of one object's content stays with that object
            reason = f"phalanx cannot read it: {type(exc).__name__}: {exc}"[:1024]
        refusal = refusal_of(kind, raw, reason)
        if self.refusals.refuse(refusal):
            log.warning("refusing %s %s, which phalanx cannot read: %s", kind, refusal.key, reason)
        return None

    def _standing(self, kind: str, raw: JsonObject) -> Refusal | None:
        return self.refusals.standing(kind, object_key(raw))

    def _old_group(self, raw: JsonObject, native: bool) -> PodGroup | None:
        group = self._state.group(object_key(raw))
        return group if group is not None and group.native == native else None

    def _node(self, raw: object) -> Node:
        node = node_from_api(raw, self.topologies)
        if node.topology_problem:
            log.warning("node %s: %s", node.name, node.topology_problem)
        return node

    def _notify_queues(self) -> None:
        for listener in self._queue_listeners:
            listener()

    def _notify_nodes(self, name: str, old: Node | None, new: Node | None) -> None:
        for listener in self._node_listeners:
            listener(name, old, new)

    def _notify(self, changes: list[tuple[Pod | None, Pod | None]]) -> None:
        for old, new in changes:
            for listener in self._listeners:
                listener(old, new)

    # -- running -----------------------------------------------------------------------------------

    def start(self, http: KubeHttp, stop: threading.Event) -> None:
        """Start watching nodes and live pods in daemon threads."""
        watched = (
            ("nodes", Collection("/api/v1/nodes"), self.replace_nodes, self.node_event),
            (
                "pods",
                Collection("/api/v1/pods", field_selector=self._pods_selector),
                self.replace_pods,
                self.pod_event,
            ),
            (
                "podgroups",
                Collection(PODGROUPS_PATH, optional=True),
                self.replace_podgroups,
                self.podgroup_event,
            ),
            (
                "native-podgroups",
                Collection(NATIVE_PODGROUPS_PATH, optional=True),
                self.replace_native_podgroups,
                self.native_podgroup_event,
            ),
            ("queues", Collection(QUEUES_PATH, optional=True), self.replace_queues, self.queue_event),
        )
        for name, collection, replace, event in watched:
            reflector = Reflector(
                http, collection, on_replace=self._settled(replace), on_event=self._settled(event), stop=stop
            )
            self._reflectors.append(reflector)
            thread = threading.Thread(target=reflector.run, name=f"watch-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _settled(self, handler: Callable[P, None]) -> Callable[P, None]:
        """``handler``, then ``settle``."""

        def apply(*args: P.args, **kwargs: P.kwargs) -> None:
            handler(*args, **kwargs)
            self._settle()

        return apply

    def wait_synced(self, timeout: float) -> bool:
        """Block until both collections are listed, or ``timeout`` seconds pass."""
        return all(r.synced.wait(timeout) for r in self._reflectors)


def _group_kind(native: bool) -> tuple[str, Callable[[JsonObject], PodGroup]]:
    """The refusal kind and converter of one kind of PodGroup."""
    return (NATIVE_PODGROUP, native_podgroup_from_api) if native else ("PodGroup", podgroup_from_api)
