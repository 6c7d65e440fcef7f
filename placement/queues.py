"""Queue reconcile pass: write every queue's status, and reclaim for queues below their fair share.

Reclaim gives a starved queue its fair share back by evicting whole preemptible gangs of queues above
theirs (``scheduling.queues.plan_reclaims``: the fewest that make room, checked on the real nodes with
the gang planner before anything is evicted, never a gang younger than its queue's minimum runtime). It
waits while pods it evicted are still terminating, so one need never evicts twice, and each pass keeps
the victims' queues at or above their own fair share (no ping-pong).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from kubeio.events import ObjectRef
from scheduling.gang_planner import GangPlan, plan_gang
from scheduling.gpu_usage import NodeGpuUsage
from scheduling.model import TERMINAL_PHASES, Node, Pod
from scheduling.promises import PromiseBook
from scheduling.queue_view import QueueView, build_queue_view, group_key, pending_of
from scheduling.queues import Eviction, PendingGroup, Queue, QueueTree, ReclaimOutcome, plan_reclaims
from scheduling.queues.resources import CPU, GPU, MEMORY, amount, format_quantity
from scheduling.snapshot import ClusterSnapshot
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)


class QueueSource(Protocol):
    """What a pass reads (``kubeio.cluster_cache.ClusterCache``)."""

    def snapshot(self) -> ClusterSnapshot:
        """Nodes and usage."""

    def pods(self) -> list[Pod]:
        """Every pod the cache has (finished ones included)."""

    def queues(self) -> list[Queue]:
        """Every Queue object."""


class QueueSink(Protocol):
    """Writes queue status (``kubeio.queues.QueueWriter``)."""

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Merge a queue's status."""


class PodDeleter(Protocol):
    """Deletes pods (``kubeio.podgroups.PodGroupWriter``)."""

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        """Delete one pod if it still has ``uid``."""


class EventSink(Protocol):
    """Records an event."""

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue one event."""


@dataclass(frozen=True, slots=True)
class QueuePass:
    """What one pass did: queues whose status was written, gangs evicted, and the reclaim messages."""

    statuses: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()


def queue_status(view: QueueView, name: str) -> dict[str, Any]:
    """Queue ``name``'s status: allocated, deserved, fair share and pending per resource, and validity."""
    state, share = view.states[name], view.shares[name]
    pending = pending_of(view, name)
    status: dict[str, Any] = {}
    for resource, key in ((GPU, "gpu"), (CPU, "cpu"), (MEMORY, "memory")):
        values = {
            "allocated": amount(state.allocated, resource),
            "deserved": amount(share.deserved, resource),
            "fairShare": amount(share.fair_share, resource),
            "pending": amount(pending, resource),
        }
        status[key] = (
            values if resource == GPU else {k: format_quantity(resource, v) for k, v in values.items()}
        )
    problems = "; ".join(view.problems)
    status["conditions"] = [
        {"type": "Valid", "status": "True", "reason": "Valid", "message": "the queue set is valid"}
        if not problems
        else {
            "type": "Valid",
            "status": "False",
            "reason": "InvalidQueueSet",
            "message": f"{problems} (the last valid set stays in force)",
        }
    ]
    return status


def _pod_ref(pod: Pod) -> ObjectRef:
    return ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid)


class QueueReconciler:
    """Queue status and reclaim, one pass at a time."""

    def __init__(
        self,
        source: QueueSource,
        sink: QueueSink,
        deleter: PodDeleter,
        events: EventSink,
        *,
        clock: Callable[[], float],
        topologies: TopologyCache,
        on_evict: Callable[[Eviction], None] = lambda _eviction: None,
    ) -> None:
        self._source = source
        self._sink = sink
        self._deleter = deleter
        self._events = events
        self._clock = clock
        self._topologies = topologies
        self._on_evict = on_evict
        self._tree: QueueTree | None = None
        self._written: dict[str, dict[str, Any]] = {}
        self._terminating: set[str] = set()
        self.view: QueueView | None = None

    def reconcile_once(self) -> QueuePass:
        """Build the view, write changed statuses, and reclaim if a queue is starved."""
        snapshot = self._source.snapshot()
        live = [p for p in self._source.pods() if p.phase not in TERMINAL_PHASES]
        view = build_queue_view(
            self._source.queues(), self._tree, snapshot.nodes.values(), live, PromiseBook()
        )
        self._tree, self.view = view.tree, view
        statuses = self._write_statuses(view)
        self._terminating &= {p.uid for p in live}
        if self._terminating:
            return QueuePass(statuses)
        by_group: dict[str, list[Pod]] = {}
        for pod in live:
            by_group.setdefault(group_key(pod), []).append(pod)
        allocated = {leaf: view.states[leaf].allocated for leaf in view.tree.leaves()}

        def fits(group: PendingGroup, victims: frozenset[str]) -> bool:
            return _fits(group, victims, by_group, snapshot.nodes, live, self._topologies)

        plans = plan_reclaims(
            view.pending,
            tree=view.tree,
            shares=view.shares,
            allocated=allocated,
            running=view.running,
            free=view.free,
            now=self._clock(),
            fits=fits,
        )
        evicted: list[str] = []
        messages: list[str] = []
        for plan in plans:
            if plan.outcome is not ReclaimOutcome.EVICT:
                continue
            messages.append(plan.message)
            for eviction in plan.evictions:
                self._evict(eviction, by_group.get(eviction.gang, []))
                evicted.append(eviction.gang)
        return QueuePass(statuses, tuple(evicted), tuple(messages))

    def _write_statuses(self, view: QueueView) -> tuple[str, ...]:
        written = []
        for name in sorted(view.tree.queues):
            status = queue_status(view, name)
            if self._written.get(name) == status:
                continue
            try:
                self._sink.set_status(name, status)
            except Exception as exc:  # the implicit default queue has no object to write to
                log.debug("queue %s: status not written: %s", name, exc)
                continue
            self._written[name] = status
            written.append(name)
        return tuple(written)

    def _evict(self, eviction: Eviction, members: Sequence[Pod]) -> None:
        log.warning("reclaim: evicting %s: %s", eviction.gang, eviction.reason)
        for pod in members:
            if pod.node_name is None:
                continue
            self._events.record(
                _pod_ref(pod),
                "Warning",
                "Reclaimed",
                f"evicted whole with {eviction.gang}: {eviction.reason}",
            )
            if self._deleter.delete_pod(pod.namespace, pod.name, pod.uid):
                self._terminating.add(pod.uid)
        self._on_evict(eviction)


def _fits(
    group: PendingGroup,
    victims: frozenset[str],
    by_group: Mapping[str, Sequence[Pod]],
    nodes: Mapping[str, Node],
    live: Sequence[Pod],
    topologies: TopologyCache,
) -> bool:
    """Whether ``group``'s waiting members can be placed on the real nodes once ``victims`` are gone."""
    gone = {p.uid for key in victims for p in by_group.get(key, ())}
    remaining: dict[str, list[Pod]] = {}
    for pod in live:
        if pod.node_name and pod.uid not in gone:
            remaining.setdefault(pod.node_name, []).append(pod)
    snapshot = ClusterSnapshot(
        MappingProxyType(dict(nodes)),
        MappingProxyType({n: NodeGpuUsage.of_pods(ps) for n, ps in remaining.items()}),
    )
    waiting = [p for p in by_group.get(group.key, ()) if p.node_name is None and not p.terminating]
    plan = plan_gang(group.key, waiting, sorted(nodes), snapshot, PromiseBook(), topologies)
    return isinstance(plan, GangPlan)
