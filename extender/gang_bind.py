"""Gang members' binds in the extender: the barrier, the plan annotation, then the Binding.

The terms of a bind (the member's reservation, how many members to wait for, how long) are the core's
(``scheduling.session.gang_bind_terms``); this module acts on them: the barrier holds a gang's bind
calls until every member has arrived, the leader writes the plan on the PodGroup before the first
Binding (so a crash can be recovered, ``extender.recovery``), and events tell users what a gang waits
for (docs/design/gang-scheduling.md §2).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from extender.barrier import BarrierBoard, Passage
from extender.extender_metrics import GangMetrics
from extender.ledger import PromiseLedger
from kubeio.binding import BindRefusedError
from kubeio.errors import KubeError
from kubeio.ports import EventSink, PlanWriter
from kubeio.render import gpu_annotations, podgroup_ref
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.record import encode_plan
from scheduling.model import Pod, PodGroup
from scheduling.plan import Assignment
from scheduling.reasons import GroupVerdict
from scheduling.session import gang_bind_terms

log = logging.getLogger(__name__)


class PodBinding(Protocol):
    """Creates one Binding (``kubeio.binding.PodBinder.bind``)."""

    def __call__(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> object:
        """Bind."""


@dataclass(frozen=True, slots=True)
class GangSettings:
    """The gang part of ``ExtenderSettings``."""

    bind_wait: float = 25.0
    bind_delay: float = 0.0


@dataclass(frozen=True, slots=True)
class GangBind:
    """How a gang member's bind ended (``error`` empty on success)."""

    error: str
    outcome: str
    gpus: tuple[int, ...] = ()
    whole: bool = True
    """``False`` when this member was bound but a member the leader bound for the gang was not: the plan
    stays on the PodGroup so that recovery completes or rolls back the gang."""


FIRST_SEEN_KEPT = 4096
"""Gangs whose first filter :class:`GangTeller` remembers at once (the oldest is forgotten first)."""


class GangTeller:
    """Events on PodGroups and the gang metrics, shared by filter, bind and recovery.

    The first-seen table behind ``time_to_bound`` is bounded: a gang that never binds (deleted, or a
    PodGroup name no object has) would otherwise stay in it for the life of the process. Past
    ``first_seen_kept`` gangs the one seen longest ago is forgotten, and its time to bound goes unobserved.
    """

    def __init__(
        self,
        events: EventSink | None,
        metrics: GangMetrics | None,
        clock: Callable[[], float],
        *,
        first_seen_kept: int = FIRST_SEEN_KEPT,
    ):
        self.events = events
        self.metrics = metrics
        self._clock = clock
        self._first_seen: dict[str, float] = {}  # insertion order is first-seen order
        self._kept = first_seen_kept
        self._lock = threading.Lock()

    def seen(self, key: str) -> None:
        """A member of ``key`` reached filter: the gang's time to bound starts at the first."""
        now = self._clock()
        with self._lock:
            self._first_seen.setdefault(key, now)
            while len(self._first_seen) > self._kept:
                del self._first_seen[next(iter(self._first_seen))]

    def bound(self, key: str) -> None:
        """The gang was released to bind: observe its time to bound."""
        with self._lock:
            first = self._first_seen.pop(key, None)
        if first is not None and self.metrics is not None:
            self.metrics.time_to_bound.observe(self._clock() - first)

    def verdict(self, group: PodGroup | None, verdict: GroupVerdict) -> None:
        """Record a filter verdict on the group."""
        self.tell(group, verdict.event_type, verdict.verdict.value, verdict.message)

    def tell(self, group: PodGroup | None, type_: str, reason: str, message: str) -> None:
        """Record one event on ``group`` (nothing before the PodGroup exists)."""
        if self.events is not None and group is not None:
            self.events.record(podgroup_ref(group), type_, reason, message)

    def announce(self, group: PodGroup, type_: str, reason: str, message: str) -> None:
        """Write one event on ``group`` now, before the action it tells of (``EventRecorder.record_now``)."""
        if self.events is not None:
            self.events.record_now(podgroup_ref(group), type_, reason, message)


class GangBinder:
    """Bind for pods that belong to a PodGroup."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        ledger: PromiseLedger,
        writer: PlanWriter,
        bind: PodBinding,
        *,
        clock: Callable[[], float],
        teller: GangTeller,
        node_gone: Callable[[str], str],
        settings: GangSettings = GangSettings(),
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._snapshot = snapshot
        self._node_gone = node_gone
        self._ledger = ledger
        self._writer = writer
        self._bind = bind
        self._teller = teller
        self._settings = settings
        self._sleep = sleep
        self._clock = clock
        self.board = BarrierBoard(clock)

    def bind(self, pod: Pod, node: str) -> GangBind:
        """Hold the bind until the gang is complete, then write the plan and bind this member."""
        terms = gang_bind_terms(
            pod, node, self._snapshot(), self._ledger.book, bind_wait=self._settings.bind_wait
        )
        if terms.group is None or terms.promise is None:
            return GangBind(terms.error, terms.outcome)
        group, key = terms.group, terms.group.key
        log.debug(
            "gang %s: %s reached bind (needs %d, waits up to %.0fs)", key, pod.name, terms.need, terms.wait
        )
        # While members keep arriving the reservation must outlast a parked member's retry.
        self._ledger.renew_group(key, self._clock() + 2 * terms.wait)
        passage = self.board.join(key, pod.uid, terms.need, terms.wait, keep=self._still_reserved(key))
        log.debug(
            "gang %s: %s leaves the barrier (open=%s, leader=%s)", key, pod.name, passage.open, passage.leader
        )
        result = GangBind("gang bind interrupted", "error")
        try:
            result = self._through(group, pod, node, terms.promise.gpus, passage, terms.wait)
            return result
        finally:
            if self.board.leave(key, passage, bound=not result.error and result.whole) and passage.open:
                self._clear_plan(group)

    def _through(
        self, group: PodGroup, pod: Pod, node: str, gpus: tuple[int, ...], passage: Passage, wait: float
    ) -> GangBind:
        key = group.key
        if passage.parked:
            return GangBind(
                f"gang {key}: {len(passage.arrived)} of {group.min_member} members have reached bind; "
                "the reservation is kept while more arrive, and this member will be bound with them",
                "barrier_parked",
            )
        if not passage.open:
            self._ledger.release_group(key)
            message = (
                f"gang {key}: only {len(passage.arrived)} of {group.min_member} members reached bind "
                f"within {wait:.0f}s; released the reservation, members will be scheduled again"
            )
            if passage.rank == 0:
                self._teller.tell(group, "Warning", "GangBindTimeout", message)
                if self._teller.metrics is not None:
                    self._teller.metrics.barrier_timeouts.inc()
            return GangBind(message, "barrier_timeout")
        recorded = None
        if passage.leader:
            lost = self._lost(key, passage.arrived) or self._gone(passage.arrived)
            recorded = False if lost else self._write_plan(group, passage.arrived)
            if lost:
                self._ledger.release_group(key)
                message = (
                    f"gang {key}: {lost} while its members waited to bind; not binding, it is planned again"
                )
                self._teller.tell(group, "Warning", "GangBindAbandoned", message)
        if recorded is not None:
            self.board.publish_plan(passage, recorded)
        if not (recorded if recorded is not None else self.board.await_plan(passage, wait)):
            # Without the plan on the PodGroup a crash mid-bind could not be recovered: nobody binds.
            return GangBind(
                f"gang {key}: the bind plan could not be recorded, or the reservation was lost "
                "(the PodGroup's events say which); not binding",
                "plan_failed",
            )
        if self._settings.bind_delay:
            self._sleep(self._settings.bind_delay * passage.rank)
        log.debug("gang %s: binding %s to %s", key, pod.name, node)
        # Its node may have left since the plan: a Binding there makes a pod the garbage collector deletes.
        # The cache sees a deletion a watch lag late (the soak saw a gang bound 0.35 s after its node was
        # deleted), so the API server is asked too, one GET per member, just before its Binding.
        gone = self._lost(key, (pod.uid,)) or self._node_gone(node)
        if gone:
            return GangBind(f"gang {key}: {pod.name} is not bound: {gone}", "no_reservation")
        try:
            self._bind(pod.namespace, pod.name, pod.uid, node, gpu_annotations(gpus))
        except (BindRefusedError, KubeError) as exc:
            self._ledger.release(pod.uid)
            return GangBind(f"gang {key}: binding {pod.name} to {node} failed: {exc}", "refused")
        absent_failed = self._bind_absent(key, passage.absent)
        if absent_failed:
            log.warning("gang %s: %s; recovery completes or rolls back the gang", key, absent_failed)
            self._teller.tell(group, "Warning", "GangBindIncomplete", f"gang {key}: {absent_failed}")
            return GangBind("", "bound", gpus, whole=False)
        if passage.leader:
            self._teller.bound(key)
            self._teller.tell(
                group, "Normal", "GangBound", f"gang {key}: all members released to bind together"
            )
        return GangBind("", "bound", gpus)

    def _lost(self, key: str, members: Sequence[str]) -> str:
        """Why the reservation of ``members`` no longer holds (``""`` while it does).

        A node deleted or not Ready while members wait in the barrier releases the gang's reservation
        (``ExtenderService.node_changed``); the API server does not check a Binding's node, so binding
        there anyway makes pods that the pod garbage collector deletes: the gang would be lost.
        """
        book, nodes = self._ledger.book, self._snapshot().nodes
        for uid in members:
            promise = book.by_uid.get(uid)
            if promise is None or promise.group != key:
                return f"member {uid} lost its reservation"
            node = nodes.get(promise.node)
            if node is None or not node.ready:
                return f"node {promise.node} left the cluster or is not Ready"
        return ""

    def _gone(self, members: Sequence[str]) -> str:
        """Why a node of the plan cannot take a Binding, read from the API server, not the cache.

        ``_lost`` sees a node's deletion a watch lag late; the leader asks the API server once per node
        of the plan before recording it, so a gang is not bound to a node deleted a moment ago.
        """
        book = self._ledger.book
        nodes = sorted({book.by_uid[uid].node for uid in members if uid in book.by_uid})
        return next((why for why in map(self._node_gone, nodes) if why), "")

    def _still_reserved(self, key: str) -> Callable[[str], bool]:
        def reserved(uid: str) -> bool:
            promise = self._ledger.book.by_uid.get(uid)
            return promise is not None and promise.group == key

        return reserved

    def _bind_absent(self, key: str, absent: Sequence[str]) -> str:
        """Bind the members that arrived earlier and left parked; the reason of the first failure, or ``""``.

        kube-scheduler may retry one of them meanwhile: both Bindings name the reserved node, and the
        binder takes "already bound there" as success, so whichever comes second changes nothing.
        """
        for uid in absent:
            promise = self._ledger.book.by_uid.get(uid)
            if promise is None:
                return f"member {uid} lost its reservation before the gang was bound"
            namespace, name = promise.pod_key.split("/", 1)
            gone = self._node_gone(promise.node)
            if gone:
                return f"{name} (arrived earlier) is not bound: {gone}"
            log.debug("gang %s: binding %s (arrived earlier) to %s", key, name, promise.node)
            try:
                self._bind(namespace, name, uid, promise.node, gpu_annotations(promise.gpus))
            except (BindRefusedError, KubeError) as exc:
                self._ledger.release(uid)
                return f"binding {name} (arrived earlier) to {promise.node} failed: {exc}"
        return ""

    def _write_plan(self, group: PodGroup, arrived: Sequence[str]) -> bool:
        book = self._ledger.book
        members = [
            Assignment(book.by_uid[uid].pod_key, uid, book.by_uid[uid].node, book.by_uid[uid].gpus)
            for uid in arrived
            if uid in book.by_uid
        ]
        plan = encode_plan(members)
        try:
            self._writer.set_plan(group.namespace, group.name, plan)
        except KubeError as exc:
            log.warning("gang %s: could not write the bind plan: %s", group.key, exc)
            self._ledger.release_group(group.key)
            return False
        log.info("gang %s: binding as planned: %s", group.key, plan)  # the GPUs of each member, as bind logs
        return True

    def _clear_plan(self, group: PodGroup) -> None:
        """Every member of the release is bound: the plan has done its job (recovery would clear it too)."""
        try:
            self._writer.set_plan(group.namespace, group.name, None)
        except KubeError as exc:
            log.info("gang %s: plan annotation stays for the recovery pass to clear: %s", group.key, exc)
