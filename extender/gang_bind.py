"""Gang scheduling in the extender: reserve at filter, bind barrier, plan annotation, recovery.

The decisions are the core's (``scheduling.gang_filter``, ``scheduling.gang_record``); this module
supplies what they need and acts on them: the promise ledger, the barrier that holds a gang's bind
calls until every member has arrived, the plan annotation written to the PodGroup before the first
Binding, events that tell users what a gang waits for, and the loop that completes or rolls back a
gang left half-bound (architecture.md §3).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from extender.barrier import BarrierBoard, Passage
from extender.ledger import PromiseLedger
from extender.metrics import GangMetrics
from kubeio.binding import BindRefusedError
from kubeio.convert import format_gpu_indices
from kubeio.errors import KubeError
from kubeio.events import ObjectRef
from scheduling import reasons
from scheduling.gang_filter import decide_gang_member
from scheduling.gang_record import PlanError, PlannedMember, decode_plan, encode_plan, plan_recovery
from scheduling.gpu_fit import FilterDecision
from scheduling.model import GPUS_ANNOTATION, Pod, PodGroup
from scheduling.promises import PromiseBook
from scheduling.snapshot import ClusterSnapshot
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)


class GangView(Protocol):
    """What gang decisions read: ``kubeio.cluster_cache.ClusterCache`` or a fake."""

    def snapshot(self) -> ClusterSnapshot:
        """The current nodes and usage."""

    def podgroup(self, key: str) -> PodGroup | None:
        """A PodGroup by ``namespace/name``."""

    def members(self, key: str) -> list[Pod]:
        """The live pods of a PodGroup."""

    def podgroups(self) -> list[PodGroup]:
        """Every PodGroup."""


class GangWriter(Protocol):
    """What gang handling writes: ``kubeio.podgroups.PodGroupWriter`` plus the binder."""

    def set_plan(self, namespace: str, name: str, plan: str | None) -> None:
        """Write or remove the plan annotation."""

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        """Delete a member (rollback)."""


class PodBinding(Protocol):
    """Creates one Binding (``kubeio.binding.PodBinder.bind``)."""

    def __call__(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> object:
        """Bind."""


class EventSink(Protocol):
    """Records an event (``kubeio.events.EventRecorder``)."""

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue one event."""


@dataclass(frozen=True, slots=True)
class GangSettings:
    """The gang part of ``ExtenderSettings``."""

    reservation_ttl: float = 60.0
    bind_wait: float = 25.0
    bind_delay: float = 0.0
    locality_keys: tuple[str, ...] = ("phalanx.io/rack", "topology.kubernetes.io/zone")


@dataclass(frozen=True, slots=True)
class GangBind:
    """How a gang member's bind ended (``error`` empty on success)."""

    error: str
    outcome: str
    gpus: tuple[int, ...] = ()


def group_ref(group: PodGroup) -> ObjectRef:
    """The PodGroup as the object of an event."""
    return ObjectRef("PodGroup", "scheduling.x-k8s.io/v1alpha1", group.namespace, group.name, group.uid)


class GangCoordinator:
    """Filter and bind for pods that belong to a PodGroup."""

    def __init__(
        self,
        cluster: GangView,
        ledger: PromiseLedger,
        writer: GangWriter,
        bind: PodBinding,
        *,
        clock: Callable[[], float],
        topologies: TopologyCache,
        settings: GangSettings = GangSettings(),
        events: EventSink | None = None,
        metrics: GangMetrics | None = None,
        sleep: Callable[[float], None] = time.sleep,
        hold: Callable[[Pod], str | None] = lambda _pod: None,
    ) -> None:
        self._cluster = cluster
        self._ledger = ledger
        self._writer = writer
        self._bind = bind
        self._clock = clock
        self._topologies = topologies
        self._settings = settings
        self._events = events
        self._metrics = metrics
        self._sleep = sleep
        self._hold = hold
        self.board = BarrierBoard(clock)
        self._first_seen: dict[str, float] = {}
        self._seen_lock = threading.Lock()

    # -- filter ------------------------------------------------------------------------------------

    def filter(self, pod: Pod, node_names: Sequence[str]) -> FilterDecision:
        """Answer filter for a gang member from its reservation, or plan its whole gang."""
        key = pod.group_key or ""
        now = self._clock()
        with self._seen_lock:
            self._first_seen.setdefault(key, now)
        group = self._cluster.podgroup(key)
        members = self._cluster.members(key)
        if all(m.uid != pod.uid for m in members):
            members = [*members, pod]  # kube-scheduler can be a moment ahead of our cache
        snapshot = self._cluster.snapshot()
        if pod.uid not in self._ledger.book.by_uid:
            held = self._hold(pod)
            if held is not None:
                self._tell(group, "Warning", "QueueHold", held)
                rejection = reasons.queue_hold(held)
                return FilterDecision((), MappingProxyType({n: rejection for n in dict.fromkeys(node_names)}))

        def change(book: PromiseBook) -> tuple[PromiseBook, FilterDecision]:
            book, lapsed = book.expire(now)
            for gone in {p.group for p in lapsed if p.group}:
                log.info("reservation of gang %s expired", gone)
            decision = decide_gang_member(
                pod,
                group,
                members,
                node_names,
                snapshot,
                book,
                self._topologies,
                now=now,
                reservation_ttl=self._settings.reservation_ttl,
                locality_keys=self._settings.locality_keys,
            )
            self._tell(
                group,
                "Normal" if decision.feasible else "Warning",
                _reason(decision.verdict),
                decision.verdict,
            )
            return decision.promises, FilterDecision(decision.feasible, decision.rejected)

        result = self._ledger.update(change)
        if self._metrics is not None:
            self._metrics.reservations.set(len(self._ledger.book.by_group))
        return result

    # -- bind --------------------------------------------------------------------------------------

    def bind(self, pod: Pod, node: str) -> GangBind:
        """Hold the bind until the gang is complete, then write the plan and bind this member."""
        key = pod.group_key or ""
        group = self._cluster.podgroup(key)
        promise = self._ledger.book.by_uid.get(pod.uid)
        if group is None or promise is None or promise.group != key:
            return GangBind(
                f"gang {key}: {pod.name} has no reservation (it expired); it will be planned again",
                "no_reservation",
            )
        if promise.node != node:
            return GangBind(f"gang {key}: {pod.name} is reserved on {promise.node}, not {node}", "wrong_node")
        running = sum(1 for m in self._cluster.members(key) if m.holds_resources)
        wait = min(self._settings.bind_wait, float(group.timeout_seconds))
        log.debug("gang %s: %s reached bind (%d running, waiting up to %.0fs)", key, pod.name, running, wait)
        passage = self.board.join(key, pod.uid, group.min_member - running, wait)
        log.debug(
            "gang %s: %s leaves the barrier (open=%s, leader=%s)", key, pod.name, passage.open, passage.leader
        )
        result = GangBind("gang bind interrupted", "error")
        try:
            result = self._through(group, pod, node, promise.gpus, passage, wait)
            return result
        finally:
            if self.board.leave(key, passage, bound=not result.error) and passage.open:
                self._clear_plan(group)

    def _through(
        self, group: PodGroup, pod: Pod, node: str, gpus: tuple[int, ...], passage: Passage, wait: float
    ) -> GangBind:
        key = group.key
        if not passage.open:
            self._ledger.release_group(key)
            message = (
                f"gang {key}: only {len(passage.arrived)} of {group.min_member} members reached bind "
                f"within {wait:.0f}s; released the reservation, members will be scheduled again"
            )
            if passage.rank == 0:
                self._tell(group, "Warning", "GangBindTimeout", message)
                if self._metrics is not None:
                    self._metrics.barrier_timeouts.inc()
            return GangBind(message, "barrier_timeout")
        if passage.leader:
            ok = self._write_plan(group, passage.arrived)
            self.board.publish_plan(passage, ok)
        elif not self.board.await_plan(passage, wait):
            return GangBind(f"gang {key}: the bind plan could not be recorded; not binding", "plan_failed")
        if self._settings.bind_delay:
            self._sleep(self._settings.bind_delay * passage.rank)
        annotations = {GPUS_ANNOTATION: format_gpu_indices(gpus)} if gpus else {}
        log.debug("gang %s: binding %s to %s", key, pod.name, node)
        try:
            self._bind(pod.namespace, pod.name, pod.uid, node, annotations)
        except (BindRefusedError, KubeError) as exc:
            self._ledger.release(pod.uid)
            return GangBind(f"gang {key}: binding {pod.name} to {node} failed: {exc}", "refused")
        if passage.leader:
            self._finished(group)
        return GangBind("", "bound", gpus)

    def _write_plan(self, group: PodGroup, arrived: Sequence[str]) -> bool:
        book = self._ledger.book
        members = [
            PlannedMember(
                uid, book.by_uid[uid].pod_key.split("/", 1)[1], book.by_uid[uid].node, book.by_uid[uid].gpus
            )
            for uid in arrived
            if uid in book.by_uid
        ]
        try:
            self._writer.set_plan(group.namespace, group.name, encode_plan(members))
        except KubeError as exc:
            log.warning("gang %s: could not write the bind plan: %s", group.key, exc)
            self._ledger.release_group(group.key)
            return False
        return True

    def _clear_plan(self, group: PodGroup) -> None:
        """Every member of the release is bound: the plan has done its job (recovery would clear it too)."""
        try:
            self._writer.set_plan(group.namespace, group.name, None)
        except KubeError as exc:
            log.info("gang %s: plan annotation stays for the recovery pass to clear: %s", group.key, exc)

    def _finished(self, group: PodGroup) -> None:
        with self._seen_lock:
            first = self._first_seen.pop(group.key, None)
        if first is not None and self._metrics is not None:
            self._metrics.time_to_bound.observe(self._clock() - first)
        self._tell(group, "Normal", "GangBound", f"gang {group.key}: all members released to bind together")

    # -- recovery ----------------------------------------------------------------------------------

    def recover_all(self) -> int:
        """Complete or roll back every gang left with a plan annotation; return how many were handled."""
        handled = 0
        for group in self._cluster.podgroups():
            if group.plan is None or self.board.active(group.key):
                continue
            handled += 1
            self.recover(group)
        return handled

    def recover(self, group: PodGroup) -> None:
        """Finish one gang from its plan annotation (see ``scheduling.gang_record``)."""
        try:
            plan = decode_plan(group.plan or "")
        except PlanError as exc:
            log.warning("gang %s: %s; removing it", group.key, exc)
            self._writer.set_plan(group.namespace, group.name, None)
            return
        pods = {p.name: p for p in self._cluster.members(group.key)}
        recovery = plan_recovery(plan, pods)
        log.debug(
            "gang %s recovery: plan %s, pods %s",
            group.key,
            [(m.name, m.node) for m in plan],
            [(p.name, p.node_name, p.terminating) for p in pods.values()],
        )
        try:
            for member in recovery.bind:
                annotations = {GPUS_ANNOTATION: format_gpu_indices(member.gpus)} if member.gpus else {}
                self._bind(group.namespace, member.name, member.uid, member.node, annotations)
            for pod in recovery.delete:
                self._writer.delete_pod(pod.namespace, pod.name, pod.uid)
            self._writer.set_plan(group.namespace, group.name, None)
        except KubeError as exc:
            log.warning("gang %s: recovery step failed (%s); will try again", group.key, exc)
            return
        if not recovery.done:
            log.info("gang %s recovered: %s", group.key, recovery.reason)
            self._tell(
                group,
                "Warning" if recovery.delete else "Normal",
                "GangRecovered",
                f"gang {group.key}: {recovery.reason}",
            )
            if self._metrics is not None:
                self._metrics.recoveries.labels("rolled_back" if recovery.delete else "completed").inc()
        for member in plan:
            self._ledger.release(member.uid)

    def run_recovery(self, stop: threading.Event, interval: float) -> None:
        """Run ``recover_all`` every ``interval`` seconds until ``stop`` is set."""
        while not stop.wait(interval):
            try:
                self.recover_all()
            except Exception:  # the loop must outlive any one bad gang
                log.exception("gang recovery pass failed")

    def _tell(self, group: PodGroup | None, type_: str, reason: str, message: str) -> None:
        if self._events is not None and group is not None:
            self._events.record(group_ref(group), type_, reason, message)


def _reason(verdict: str) -> str:
    if "reserved" in verdict:
        return "GangReserved"
    return "GangWaiting"
