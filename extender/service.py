"""The extender's verbs as plain methods: read one snapshot, ask the core once, apply its answer.

No Flask here, so every verb is unit-testable with an in-memory cluster. Every decision is the core's
(``scheduling.session``); this module supplies what it reads and applies what it returns. The only
mutable decision state is the promise book (GPUs chosen by ``bind`` whose binding the cache has not
shown yet, and gangs' reservations), swapped atomically as an immutable value under one lock;
``filter`` of a pod on its own and ``prioritize`` read it without locking.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from extender.decisions import DecisionLog
from extender.gang_bind import GangBinder, GangTeller
from extender.ledger import PromiseLedger
from extender.nominator import Nominator
from extender.nudger import Nudger
from extender.view_keeper import ViewKeeper
from kubeio.binding import BindRefusedError, BindStatus
from kubeio.errors import KubeError
from kubeio.ports import Binder, ClusterSource
from kubeio.render import gpu_annotations
from scheduling.admission.queue_hold import AdmittedBook, RoomMemo
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS
from scheduling.gang.stand_in import is_stand_in
from scheduling.gpu.choice import NoGpusError
from scheduling.gpu.fit import FilterDecision
from scheduling.model import Node, Pod, group_key
from scheduling.nodes.decisive import TieMemo, decisive_node
from scheduling.nodes.rank_index import NotIndexed, RankIndex
from scheduling.nodes.ranking import ScoreMemo
from scheduling.nodes.readiness import promises_ended
from scheduling.preempt_session import Victims, narrow_victims
from scheduling.queues import QueueRule
from scheduling.queues.view import QueueView
from scheduling.session import (
    Chooser,
    FilterInput,
    FilterOutcome,
    SessionSettings,
    choose_for_bind,
    filter_pod,
    prioritize_pod,
)
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)


class UnknownNodeError(ValueError):
    """A request names a node the extender has never seen; answered with HTTP 400."""


@dataclass(frozen=True, slots=True)
class BindOutcome:
    """How one bind call ended.

    Attributes:
        error: empty on success, else the message kube-scheduler puts in the pod's event.
        outcome: a stable name for metrics (``bound``, ``already_bound``, ``refused``, ...).
        gpus: the GPU indices the pod holds after a successful bind.
    """

    error: str
    outcome: str
    gpus: tuple[int, ...] = ()


class Extender:
    """filter, prioritize, bind and preempt over one cluster source: read, ask the core, apply."""

    def __init__(
        self,
        cluster: ClusterSource,
        binder: Binder,
        *,
        clock: Callable[[], float],
        promise_ttl: float,
        topologies: TopologyCache | None = None,
        ledger: PromiseLedger | None = None,
        gangs: GangBinder | None = None,
        teller: GangTeller | None = None,
        views: ViewKeeper | None = None,
        nudger: Nudger | None = None,
        nominator: Nominator | None = None,
        reservation_ttl: float = 60.0,
        locality_keys: tuple[str, ...] = DEFAULT_LOCALITY_KEYS,
        wall_clock: Callable[[], float] = time.time,
        decisions: DecisionLog | None = None,
        decisive: bool = False,
    ) -> None:
        self._cluster = cluster
        self._binder = binder
        self._clock = clock
        self._wall_clock = wall_clock
        self._topologies = topologies or TopologyCache()
        self._score_memo = ScoreMemo()
        self._ties = TieMemo()
        self._index = RankIndex()
        self._candidates: tuple[tuple[str, ...], AbstractSet[str]] = ((), frozenset())
        self._room = RoomMemo()
        self.ledger = ledger or PromiseLedger()
        self.gangs = gangs
        """Gang binds; without it PodGroup labels are ignored and every pod is placed on its own."""
        self.teller = teller or GangTeller(None, None, clock)
        self.views = views
        """Queue rules; without them every pod is admitted as far as queues go."""
        self.nudger = nudger
        self.nominator = nominator
        """Writes reserved gang members' nominated nodes; woken when a reservation is made or ends."""
        self.decisive = decisive
        """Answer filter with the one node phalanx ranks first (``scheduling.nodes.decisive``)."""
        self.decisions = decisions or DecisionLog()
        """The last decisions that turned a pod down, with everything they read, for ``/debug/decision``."""
        self.settings = SessionSettings(
            gangs=gangs is not None,
            reservation_ttl=reservation_ttl,
            promise_ttl=promise_ttl,
            locality_keys=locality_keys,
        )

    @property
    def promises(self) -> PromiseBook:
        """The open promises (an immutable value)."""
        return self.ledger.book

    def filter(self, pod: Pod, node_names: tuple[str, ...], *, ranked: str = "") -> FilterDecision:
        """Ask the core (``scheduling.session.filter_pod``) and apply its answer.

        In decisive mode (``decisive``), a pod on its own with several feasible nodes, and no ``ranked``
        reason (the in-tree preferences phalanx does not model, ``extender.wire.ranked_path_reason``),
        gets only the node phalanx ranks first (``scheduling.nodes.decisive``): kube-scheduler then takes
        it without scoring. A gang member's answer is its reserved node already.

        Applying means: keep the promise book it returns (a gang's reservation, under the ledger's lock so
        two gangs never reserve the same GPUs), count an admitted group against its queue (and stop counting
        one this decision found no node and no reservation for), tell the group
        the verdict, and remember a pod left with no node so it is woken when capacity frees up.
        """
        snapshot = self._cluster.snapshot()
        alone = not (self.settings.gangs and pod.group_key is not None)  # a gang member has its reservation
        choose = self._choose if self.decisive and alone and not ranked else None
        view = self.views.view if self.views else None
        asked, outcome = self._decide(pod, node_names, snapshot, view, choose)
        if outcome.unknown_queue and self.views is not None and self.views.lags(snapshot):
            asked, outcome = self._decide(pod, node_names, snapshot, self.views.refresh(), choose)
        self._apply(asked, outcome)
        decision = outcome.decision
        if choose is not None and len(decision.feasible) > 1:  # the index could not answer
            chosen = decisive_node(
                pod,
                decision.feasible,
                snapshot,
                asked.promises,
                self._topologies,
                self._score_memo,
                self._ties,
            )
            if chosen is not None:
                return FilterDecision((chosen,), decision.rejected)
        return decision

    def _choose(
        self, pod: Pod, candidates: tuple[str, ...], snapshot: ClusterSnapshot, promises: PromiseBook
    ) -> str | None:
        """The decisive node from the rank index; ``None`` (decide in full) when it cannot answer.

        The set of the candidates is kept with the tuple it was made of: the hot path hands the same
        tuple object for the same candidate list (``extender.hot.NamesMemo``), and hashing 5,000 names
        again would be most of a decision's cost.
        """
        last = self._candidates
        if last[0] is candidates:
            names = last[1]
        else:
            names = frozenset(candidates)
            self._candidates = (candidates, names)
        try:
            return self._index.choose(pod, names, snapshot, promises, self._topologies, self._score_memo)
        except NotIndexed:
            return None

    def _decide(
        self,
        pod: Pod,
        node_names: tuple[str, ...],
        snapshot: ClusterSnapshot,
        view: QueueView | None,
        choose: Chooser | None = None,
    ) -> tuple[FilterInput, FilterOutcome]:
        admitted = self.views.admitted if self.views is not None else AdmittedBook()
        tried = self.views.tried if self.views is not None else None
        now, wall = self._clock(), self._wall_clock()

        def decide(book: PromiseBook) -> tuple[PromiseBook, tuple[FilterInput, FilterOutcome]]:
            asked = FilterInput(pod, node_names, snapshot, book, view, admitted, now, tried, wall)
            outcome = filter_pod(
                asked, topologies=self._topologies, settings=self.settings, room=self._room, choose=choose
            )
            return outcome.promises, (asked, outcome)

        if self.settings.gangs and pod.group_key is not None:
            return self.ledger.update(decide)
        return decide(self.ledger.book)[1]

    def _apply(self, asked: FilterInput, outcome: FilterOutcome) -> None:
        pod = asked.pod
        self.decisions.remember(asked, outcome)
        lapsed = sorted({p.group for p in outcome.lapsed if p.group})
        for gone in lapsed:
            log.info("reservation of gang %s expired", gone)
        if lapsed and self.nudger is not None:
            self.nudger.room_freed()
        if self.nominator is not None and (lapsed or outcome.plan is not None):
            self.nominator.wake()
        if self.views is not None:
            self.views.record(outcome.admitted, asked.now)
            key = group_key(pod)
            self.views.tried_now(key, asked.now)
            if not outcome.feasible and not outcome.promises.by_group.get(key):
                self.views.withdraw(key)  # it holds nothing now, whatever an earlier filter admitted
        if pod.group_key is not None and self.settings.gangs:
            self.teller.seen(pod.group_key)
        if outcome.verdict is not None and pod.group_key is not None and self.settings.gangs:
            self.teller.verdict(asked.snapshot.podgroup(pod.group_key), outcome.verdict)
        if self.nudger is not None:
            if not outcome.feasible:
                told = outcome.verdict.message if outcome.verdict is not None else ""
                self.nudger.turned_down(pod, told)
            if outcome.verdict is not None and pod.group_key is not None:
                self.nudger.group_told(pod.group_key, outcome.verdict.message)
            hold = outcome.hold
            if hold is not None and hold.rule is QueueRule.HELD_FOR_AHEAD:
                self.nudger.held_for_ahead(pod, group_key(pod), hold.ahead)
            if outcome.plan is not None:  # members turned down while the gang waited come back now
                self.nudger.reserved(
                    a.uid for a in outcome.plan.assignments if a.uid != pod.uid and not is_stand_in(a.uid)
                )

    def prioritize(self, pod: Pod, node_names: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
        """Integer 0..10 scores: GPU connectivity first, packing second (``scheduling.nodes.ranking``)."""
        return prioritize_pod(
            pod, node_names, self._cluster.snapshot(), self.ledger.book, self._topologies, self._score_memo
        )

    def preempt(self, pod: Pod, victims: Victims) -> Victims:
        """Narrow kube-scheduler's proposed victims to those ``pod`` may preempt, keeping gangs whole.

        Priority preempts only within a queue, only preemptible pods past their queue's minimum runtime;
        a gang's members above its ``minMember`` go alone, other members only with their whole gang, and
        nodes that need no whole gang are preferred (``scheduling.preempt_session.narrow_victims``).

        Raises:
            UnknownNodeError: a candidate node is not in the cluster view.
        """
        snapshot = self._cluster.snapshot()
        unknown = sorted(n for n in victims if n not in snapshot.nodes)
        if unknown:
            msg = f"preempt names nodes phalanx does not know: {', '.join(unknown)}"
            raise UnknownNodeError(msg)
        if self.views is None:
            return victims
        view = self.views.view or self.views.refresh()
        kept, why = narrow_victims(pod, victims, snapshot, view.tree, now=self._wall_clock())
        for reason in why:
            log.info("preempt for %s: %s", pod.key, reason)
        return kept

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """Cache listener: a promise ends once the cache shows its pod bound, or gone.

        A gang's reservation ends with its last member: the places promised to members not created yet
        (``scheduling.gang.stand_in``) belong to no pod, so no deletion would end them, and they held
        their room until the reservation's TTL lapsed, which only a later filter call notices. With
        every pod waiting, kube-scheduler made no call, and a deleted gang kept 16 GPUs from the pods
        waiting behind it for a minute.
        """
        if new is None and old is not None:
            self.ledger.release(old.uid)
            group = old.group_key
            if (
                group is not None
                and group in self.ledger.book.by_group
                and not self._cluster.snapshot().members(group)
            ):
                self.ledger.release_group(group)
                log.info("reservation of gang %s released: its last member was deleted", group)
                if self.nominator is not None:
                    self.nominator.wake()
                if self.nudger is not None:
                    self.nudger.room_freed()
        elif new is not None and new.node_name is not None:
            self.ledger.release(new.uid)
        elif (
            old is None
            and new is not None
            and self.nominator is not None
            and new.group_key in self.ledger.book.by_group
        ):
            self.nominator.wake()  # a member created after its gang was reserved: nominate it now

    def node_changed(self, name: str, old: Node | None, new: Node | None) -> None:
        """Cache listener: GPUs promised on a node that is not Ready or was deleted are released.

        Which promises end is the core's (``scheduling.nodes.readiness.promises_ended``): every promise on
        the node, and a gang member's whole reservation, so its next filter plans it again whole.
        """
        if new is not None and new.ready:
            return
        ended = self.ledger.update(lambda book: promises_ended(book, name, new))
        if not ended:
            return
        state = "deleted" if new is None else "not Ready"
        for gang in sorted({p.group for p in ended if p.group is not None}):
            log.warning("node %s is %s: released the reservation of gang %s", name, state, gang)
        for promise in ended:
            if promise.group is None:
                log.warning(
                    "node %s is %s: released GPUs %s promised to %s",
                    name,
                    state,
                    list(promise.gpus),
                    promise.pod_key,
                )

    def bind(self, namespace: str, name: str, uid: str, node: str) -> BindOutcome:
        """Choose GPU indices on ``node``, promise them, and create the Binding.

        Raises:
            UnknownNodeError: ``node`` is not in the cluster view.
        """
        snapshot = self._cluster.snapshot()
        if node not in snapshot.nodes:
            msg = f"bind names node {node!r}, which phalanx does not know"
            raise UnknownNodeError(msg)
        pod = snapshot.pod(namespace, name) or self._binder.get_pod(namespace, name)
        if pod is None:
            return BindOutcome(f"pod {namespace}/{name} does not exist", "pod_gone")
        if pod.uid != uid:
            return BindOutcome(
                f"pod {namespace}/{name} was re-created (UID {pod.uid}, not {uid}); not binding",
                "uid_changed",
            )
        if pod.node_name is not None:
            if pod.node_name == node:
                return BindOutcome("", "already_bound", pod.gpu_indices or ())
            return BindOutcome(f"pod {pod.key} is already bound to node {pod.node_name}", "bound_elsewhere")
        if pod.group_key is not None and self.gangs is not None:
            result = self.gangs.bind(pod, node)
            return BindOutcome(result.error, result.outcome, result.gpus)
        try:
            promise = self._promise(pod, node)
        except NoGpusError as exc:
            return BindOutcome(f"node {node}: {exc} (taken since the pod was filtered)", "no_gpus")
        try:
            status = self._binder.bind(namespace, name, uid, node, gpu_annotations(promise.gpus))
        except BindRefusedError as exc:
            self.ledger.release(uid)
            return BindOutcome(f"binding {pod.key} to {node} was refused: {exc.message}", "refused")
        except KubeError as exc:
            self.ledger.release(uid)
            return BindOutcome(f"binding {pod.key} to {node} failed: {exc}", "api_error")
        if status is BindStatus.ALREADY_BOUND:
            self.ledger.release(uid)  # the earlier bind's annotation is the record; this promise is surplus
            return BindOutcome("", "already_bound")
        log.info("bound %s to %s with GPUs %s", pod.key, node, list(promise.gpus))
        return BindOutcome("", "bound", promise.gpus)

    def _promise(self, pod: Pod, node: str) -> Promise:
        def change(book: PromiseBook) -> tuple[PromiseBook, Promise]:
            book, promise, lapsed = choose_for_bind(
                pod,
                node,
                self._cluster.snapshot(),
                book,
                now=self._clock(),
                settings=self.settings,
                topologies=self._topologies,
            )
            for old in lapsed:
                log.warning("promise of GPUs %s on %s to %s lapsed", old.gpus, old.node, old.pod_key)
            return book, promise

        return self.ledger.update(change)
