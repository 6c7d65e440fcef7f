"""Fluent builders and in-memory fakes for unit tests of the core and the extender service.

Fakes stand in for the cluster only in unit tests of pure logic; integration is proven on the real
control plane (tests/e2e).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Protocol

from extender.ledger import PromiseLedger
from kubeio.binding import BindRefusedError, BindStatus
from kubeio.errors import ConflictError, KubeError
from kubeio.events import ObjectRef
from kubeio.mpijobs import MpiJob
from placement.round import Round
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.model import ADMISSION_GATE, Node, Pod, PodGroup, Resources
from scheduling.queues import QUEUE_LABEL, Queue
from scheduling.queues.view import view_of


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._node = Node(name, Resources(milli_cpu=64000, memory=512 * 2**30, gpus=8))

    def gpus(self, n: int) -> NodeBuilder:
        self._node = replace(self._node, allocatable=replace(self._node.allocatable, gpus=n))
        return self

    def labels(self, **labels: str) -> NodeBuilder:
        self._node = replace(self._node, labels=MappingProxyType(dict(labels)))
        return self

    def cpu(self, milli: int) -> NodeBuilder:
        self._node = replace(self._node, allocatable=replace(self._node.allocatable, milli_cpu=milli))
        return self

    def memory(self, size: int) -> NodeBuilder:
        self._node = replace(self._node, allocatable=replace(self._node.allocatable, memory=size))
        return self

    def not_ready(self) -> NodeBuilder:
        self._node = replace(self._node, ready=False)
        return self

    def cordoned(self) -> NodeBuilder:
        self._node = replace(self._node, unschedulable=True)
        return self

    def build(self) -> Node:
        return self._node


class PodBuilder:
    def __init__(self, name: str, namespace: str = "ml") -> None:
        self._pod = Pod(f"uid-{namespace}-{name}", namespace, name, Resources(), scheduler_name="phalanx")

    def gpus(self, n: int) -> PodBuilder:
        self._pod = replace(self._pod, requests=replace(self._pod.requests, gpus=n))
        return self

    def cpu(self, milli: int) -> PodBuilder:
        self._pod = replace(self._pod, requests=replace(self._pod.requests, milli_cpu=milli))
        return self

    def memory(self, size: int) -> PodBuilder:
        self._pod = replace(self._pod, requests=replace(self._pod.requests, memory=size))
        return self

    def queue(self, name: str) -> PodBuilder:
        self._pod = replace(self._pod, labels=MappingProxyType({**self._pod.labels, QUEUE_LABEL: name}))
        return self

    def label(self, key: str, value: str) -> PodBuilder:
        self._pod = replace(self._pod, labels=MappingProxyType({**self._pod.labels, key: value}))
        return self

    def priority(self, value: int) -> PodBuilder:
        self._pod = replace(self._pod, priority=value)
        return self

    def created(self, timestamp: str) -> PodBuilder:
        self._pod = replace(self._pod, created=timestamp)
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._pod = replace(self._pod, uid=uid)
        return self

    def on(self, node: str, gpus: Iterable[int] | None = None) -> PodBuilder:
        indices = None if gpus is None else tuple(sorted(gpus))
        self._pod = replace(self._pod, node_name=node, gpu_indices=indices, phase="Running")
        return self

    def pinned(self, *nodes: str) -> PodBuilder:
        self._pod = replace(self._pod, pinned=frozenset(nodes))
        return self

    def group(self, name: str) -> PodBuilder:
        self._pod = replace(self._pod, group=name)
        return self

    def scheduler(self, name: str) -> PodBuilder:
        """``spec.schedulerName`` (phalanx by default)."""
        self._pod = replace(self._pod, scheduler_name=name)
        return self

    def gated(self) -> PodBuilder:
        """Created through the webhook: it carries the admission gate until its group is released."""
        self._pod = replace(self._pod, gates=(*self._pod.gates, ADMISSION_GATE))
        return self

    def stamped(self) -> PodBuilder:
        """The gate webhook answered for it as it was created (annotation ``phalanx.io/gate-webhook``)."""
        self._pod = replace(self._pod, gate_stamped=True)
        return self

    def started(self, at: float) -> PodBuilder:
        self._pod = replace(self._pod, started_at=at)
        return self

    def terminating(self) -> PodBuilder:
        self._pod = replace(self._pod, terminating=True)
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._pod = replace(self._pod, phase=phase)
        return self

    def build(self) -> Pod:
        return self._pod


def a_gang(name: str, min_member: int, *, namespace: str = "ml", timeout: int = 60) -> PodGroup:
    return PodGroup(namespace, name, min_member, timeout, uid=f"uid-pg-{name}")


def members(group: str, count: int, gpus: int, *, prefix: str = "w") -> list[Pod]:
    return [a_pod(f"{prefix}{i}").gpus(gpus).group(group).build() for i in range(count)]


def a_node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def a_pod(name: str, namespace: str = "ml") -> PodBuilder:
    return PodBuilder(name, namespace)


def snapshot_of(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    groups: Iterable[PodGroup] = (),
    queues: Iterable[Queue] = (),
) -> ClusterSnapshot:
    """The snapshot the core's own ``ClusterState`` makes of these objects (no hand-built copy)."""
    return state_of(nodes, pods, groups, queues).snapshot()


def snapshot_content(snap: ClusterSnapshot) -> dict[str, object]:
    """Everything the core reads from a snapshot, as plain values (the version aside), to compare two."""
    return {
        "nodes": dict(snap.nodes),
        "usage": dict(snap.usage),
        "base_free": dict(snap.base_free),
        "open_rooms": dict(snap.open_rooms or {}),
        "room_total": snap.room_total,
        "pods": dict(snap.pods),
        "pod_uids": dict(snap.pod_uids),
        "member_uids": dict(snap.member_uids),
        "groups": dict(snap.groups),
        "queues": dict(snap.queues),
        "queue_pods": sorted(snap.queue_pod_list(), key=lambda p: p.uid),
        "elsewhere": snap.held_elsewhere(),
    }


def a_ledger(promises: Iterable[Promise]) -> PromiseLedger:
    """A promise ledger holding ``promises`` (a gang's reservation, say)."""
    ledger = PromiseLedger()
    ledger.update(lambda book: (book.add_all(promises), None))
    return ledger


@dataclass
class FakeCluster:
    """An in-memory ClusterView: dicts of nodes and pods; ``add`` moves its version as a cache change does."""

    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    groups: dict[str, PodGroup] = field(default_factory=dict)
    version: int = 0

    def add(self, *objects: Node | Pod | PodGroup) -> FakeCluster:
        self.version += 1
        for obj in objects:
            if isinstance(obj, Node):
                self.nodes[obj.name] = obj
            elif isinstance(obj, PodGroup):
                self.groups[obj.key] = obj
            else:
                self.pods[obj.key] = obj
        return self

    def snapshot(self) -> ClusterSnapshot:
        snapshot = snapshot_of(self.nodes.values(), self.pods.values(), self.groups.values())
        return replace(snapshot, version=self.version)

    def nodes_listed(self) -> bool:
        return True

    def pod(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get(f"{namespace}/{name}")


class SnapshotSource(Protocol):
    def snapshot(self) -> ClusterSnapshot: ...


def a_round(
    source: SnapshotSource,
    *,
    mpijobs: Iterable[MpiJob] | None = (),
    now: float = 1000.0,
    nodes_listed: bool = True,
) -> Round:
    """A placement round over ``source``'s snapshot now, as ``placement.round.RoundReader`` reads one."""
    snapshot = source.snapshot()
    jobs = None if mpijobs is None else tuple(mpijobs)
    return Round(snapshot, view_of(snapshot, PromiseBook()), jobs, now, nodes_listed)


@dataclass
class FakeBinder:
    """Records Bindings and applies them to a FakeCluster, like the API server would."""

    cluster: FakeCluster
    calls: list[tuple[str, str, str, Mapping[str, str]]] = field(default_factory=list)
    fail_with: KubeError | None = None
    apply: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)
    deleted_nodes: set[str] = field(default_factory=set)
    """Nodes the API server no longer has though the cache (``cluster``) still does: a watch lag."""

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        return self.cluster.pod(namespace, name)

    def node_gone(self, node: str) -> str:
        if node in self.deleted_nodes or node not in self.cluster.nodes:
            return f"node {node} was deleted"
        return "" if self.cluster.nodes[node].ready else f"node {node} is not Ready"

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> BindStatus:
        with self.lock:
            self.calls.append((f"{namespace}/{name}", uid, node, dict(annotations)))
            if self.fail_with is not None:
                raise self.fail_with
            pod = self.cluster.pods[f"{namespace}/{name}"]
            if pod.node_name is not None:
                if pod.node_name == node:
                    return BindStatus.ALREADY_BOUND
                raise BindRefusedError(
                    409, "Conflict", f"pod {name} is already assigned to node {pod.node_name}"
                )
            if self.apply:
                gpus = annotations.get("phalanx.io/gpus")
                indices = tuple(int(i) for i in gpus.split(",")) if gpus else None
                self.cluster.pods[pod.key] = replace(
                    pod, node_name=node, gpu_indices=indices, phase="Running"
                )
            return BindStatus.BOUND


@dataclass
class FakeNominator:
    """A PodNominator that records each write; pods not in ``cluster`` (or of another UID) are gone."""

    cluster: FakeCluster
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)
    fail_with: KubeError | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def nominate(self, namespace: str, name: str, uid: str, node: str | None) -> bool:
        with self.lock:
            if self.fail_with is not None:
                raise self.fail_with
            pod = self.cluster.pods.get(f"{namespace}/{name}")
            if pod is None or pod.uid != uid:
                return False
            self.calls.append((f"{namespace}/{name}", uid, node))
            return True


@dataclass
class FakeAnnotator:
    """An Annotator that records each write (``fail``: every write is refused, as for a re-created pod)."""

    writes: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    fail: bool = False

    def set(self, namespace: str, name: str, uid: str, annotations: Mapping[str, str]) -> None:
        if self.fail:
            raise ConflictError(409, "Conflict", "the pod was re-created")
        self.writes.extend((namespace, name, uid, key, value) for key, value in annotations.items())


@dataclass
class FakePlanWriter:
    """A PlanWriter over a FakeCluster: plan annotations land on its PodGroups, deletes remove pods.

    ``calls`` records ``("set_plan", key, plan)`` and ``("delete", key, uid)`` in order; with ``fail_with``
    set, plan writes record the call and then raise it.
    """

    cluster: FakeCluster
    calls: list[tuple[str, str, str | None]] = field(default_factory=list)
    fail_with: KubeError | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_plan(self, namespace: str, name: str, plan: str | None) -> None:
        key = f"{namespace}/{name}"
        with self.lock:
            self.calls.append(("set_plan", key, plan))
            if self.fail_with is not None:
                raise self.fail_with
            self.cluster.groups[key] = replace(self.cluster.groups[key], plan=plan)

    def list_members(self, namespace: str, name: str) -> tuple[Pod, ...]:
        """Every pod of the PodGroup in the cluster, finished ones included, as the API server lists them."""
        pods = (p for p in self.cluster.pods.values() if p.namespace == namespace and p.group == name)
        return tuple(sorted(pods, key=lambda p: p.name))

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        key = f"{namespace}/{name}"
        with self.lock:
            self.calls.append(("delete", key, uid))
            pod = self.cluster.pods.get(key)
            if pod is None or pod.uid != uid:
                return False
            del self.cluster.pods[key]
            return True


@dataclass
class FakeEvents:
    """An EventSink that keeps ``(kind, name, type, reason, message)`` for every event, in order."""

    events: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    written_now: list[str] = field(default_factory=list)
    """The reasons of the events written at once (``record_now``: actions' events), in order."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        with self.lock:
            self.events.append((ref.kind, ref.name, type_, reason, message))

    def record_now(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        with self.lock:
            self.written_now.append(reason)
        self.record(ref, type_, reason, message)

    def reasons(self) -> list[str]:
        return [reason for _, _, _, reason, _ in self.events]


class FakeClock:
    """The one fake of the clock port (``Callable[[], float]``, wall or monotonic): a time the test sets.

    >>> clock = FakeClock(100.0)
    >>> clock.now += 2.5
    >>> clock()
    102.5
    """

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
