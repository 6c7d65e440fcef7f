"""The scheduler's verbs as decisions of the core: each request goes down here once and comes back once.

Every driver (the extender's HTTP verbs, a simulator, ``scheduling.offline.replay``) asks these functions,
with one snapshot and the promise book it read, and applies what comes back. Nothing here reads a clock, the
API or a cache: time comes in as ``now``, everything else in the arguments.

**filter**, composed in this order (the one place the order is written):

1. *Node health* (``scheduling.nodes.readiness``): a candidate that is unknown, not Ready or cordoned is
   turned down with its own reason for every pod, and the steps below see only the other candidates
   (so a gang's reservation on a node that died is planned again).
2. *Lapsed promises* of a gang member's decision are dropped (a gang's reservation expires unless
   bind consumes it); the book that comes back is the one to keep.
3. *Queue hold* (``scheduling.admission.queue_hold``), unless the pod already holds its gang's
   reservation (the gang was admitted when it was reserved): a group its queue may not start now is
   turned down on every node with the queue's sentence, and a group let through is recorded as admitted.
4. *Gang filter* (``scheduling.gang.filter``), for a member of a PodGroup: its reserved node; or the whole
   gang planned and reserved, and its node; or every node turned down with what the gang waits for.
5. *Fit* (``scheduling.gpu.fit``), for a pod on its own: the nodes with enough free GPUs, and a reason
   for each other node.

**prioritize** ranks the feasible nodes (``scheduling.nodes.ranking``). **bind** chooses the GPU indices
and promises them (``choose_for_bind``), and for a gang member says what its bind barrier waits for
(``gang_bind_terms``). **preempt** is ``scheduling.preempt_session.narrow_victims``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from scheduling.admission.queue_hold import (
    AdmittedBook,
    AdmittedGroup,
    HoldAnswer,
    RoomMemo,
    TriedBook,
    hold_for_queue,
)
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.filter import decide_gang_member
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS, GangPlan
from scheduling.gang.stand_in import has_stand_ins
from scheduling.gpu.choice import NoGpusError, choose_gpus
from scheduling.gpu.fit import FilterDecision, filter_nodes
from scheduling.model import Pod, PodGroup
from scheduling.nodes.ranking import ScoreMemo, rank_nodes
from scheduling.nodes.readiness import split_candidates
from scheduling.queues.view import QueueView
from scheduling.reasons import GroupVerdict, Rejection, Verdict
from scheduling.topology import TopologyCache


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """What the decisions need to know about the deployment.

    Attributes:
        gangs: gang scheduling on; off, PodGroup labels are ignored and every pod is placed on its own.
        reservation_ttl: seconds a gang's reservation lasts unless bind consumes it.
        promise_ttl: seconds GPUs chosen at bind stay promised if the bound pod never shows.
        locality_keys: node labels of locality domains a gang prefers, innermost first.
    """

    gangs: bool = True
    reservation_ttl: float = 60.0
    promise_ttl: float = 300.0
    locality_keys: tuple[str, ...] = DEFAULT_LOCALITY_KEYS


@dataclass(frozen=True, slots=True)
class FilterInput:
    """Everything one filter decision reads: save it, and the decision can be replayed.

    Attributes:
        pod: the pod kube-scheduler asks about.
        candidates: the node names it sent, in its order.
        snapshot: the cluster when the decision was taken.
        promises: the open promises then.
        view: the queue view then (``None``: no queue rules).
        admitted: groups admitted since that view was built.
        now: the driver's clock.
        tried: when kube-scheduler last tried each group; ``None`` counts every group ahead as tried now.
        wall: the wall clock then (seconds since the epoch; 0: not known), which the API's creation
            times are compared with.
    """

    pod: Pod
    candidates: tuple[str, ...]
    snapshot: ClusterSnapshot
    promises: PromiseBook
    view: QueueView | None
    admitted: AdmittedBook
    now: float
    tried: TriedBook | None = None
    wall: float = 0.0


@dataclass(frozen=True, slots=True)
class FilterOutcome:
    """One filter decision and what the driver must apply.

    Attributes:
        feasible: the nodes that can take the pod, in the order they were sent.
        rejected: every other node, with its reason.
        promises: the promise book to keep (a reservation added, lapsed promises dropped).
        verdict: what the decision says about the pod's group (held, reserved, waiting), for its events;
            ``None`` for a pod on its own that its queue let through.
        admitted: the group the queue hold let through, to count against its queue until the view does.
        lapsed: promises that expired at this decision, for the log.
        plan: the gang plan this decision made, if it made one.
        unknown_queue: held because the queue view does not know the pod's queue; a driver whose view
            lags the snapshot rebuilds it and asks again (kube-scheduler does not watch Queues, so a
            stale "does not exist" would park the pod until its next retry).
        hold: the queue hold's whole answer when it ran (the rule that held the group, the groups
            ahead), for ``scheduling.explain``.
    """

    feasible: tuple[str, ...]
    rejected: Mapping[str, Rejection]
    promises: PromiseBook
    verdict: GroupVerdict | None = None
    admitted: tuple[str, AdmittedGroup] | None = None
    lapsed: tuple[Promise, ...] = ()
    plan: GangPlan | None = None
    unknown_queue: bool = False
    hold: HoldAnswer | None = None

    @property
    def decision(self) -> FilterDecision:
        """The part kube-scheduler gets."""
        return FilterDecision(self.feasible, self.rejected)


Chooser = Callable[[Pod, tuple[str, ...], ClusterSnapshot, PromiseBook], "str | None"]
"""The decisive node among the candidates for a pod on its own, or ``None`` when none is feasible
(``scheduling.nodes.rank_index.RankIndex.choose`` over a set of them)."""


def filter_pod(
    request: FilterInput,
    *,
    topologies: TopologyCache,
    settings: SessionSettings,
    room: RoomMemo | None = None,
    choose: Chooser | None = None,
) -> FilterOutcome:
    """Decide filter for ``request.pod`` (the composition rule is in the module docstring).

    ``room`` memoises the free room per (snapshot, book) pair across calls; the answer is the same
    without it. With ``choose`` (decisive mode, a pod on its own), a pod its queue lets through gets the
    one node ``choose`` picks, without judging every candidate; when it finds none (or the queue holds
    the pod) the full filter below decides, with every node's reason.
    """
    if choose is not None:
        decided = _decided(request, settings=settings, room=room, choose=choose)
        if decided is not None:
            return decided
    healthy, unhealthy = split_candidates(request.candidates, request.snapshot.nodes)
    if not unhealthy:
        return _filter_healthy(request, topologies=topologies, settings=settings, room=room)
    outcome = _filter_healthy(
        replace(request, candidates=healthy), topologies=topologies, settings=settings, room=room
    )
    rejected = MappingProxyType({**outcome.rejected, **unhealthy})
    return replace(outcome, rejected=rejected)


def _decided(
    request: FilterInput, *, settings: SessionSettings, room: RoomMemo | None, choose: Chooser
) -> FilterOutcome | None:
    """Steps 3 and 5 for a pod on its own, with the fit replaced by ``choose``; ``None``: decide in full."""
    pod, snapshot, promises = request.pod, request.snapshot, request.promises
    if settings.gangs and pod.group_key is not None:
        return None
    free = (room or RoomMemo()).free(snapshot, promises)
    hold = hold_for_queue(
        pod,
        snapshot,
        promises,
        request.view,
        request.admitted,
        now=request.now,
        free=free,
        tried=request.tried,
    )
    if hold.held is not None:
        return None
    chosen = choose(pod, request.candidates, snapshot, promises)
    if chosen is None:
        return None
    return FilterOutcome((chosen,), _NO_REJECTIONS, promises, admitted=hold.admitted, hold=hold)


_NO_REJECTIONS: Mapping[str, Rejection] = MappingProxyType({})


def _filter_healthy(
    request: FilterInput,
    *,
    topologies: TopologyCache,
    settings: SessionSettings,
    room: RoomMemo | None,
) -> FilterOutcome:
    pod, now, snapshot = request.pod, request.now, request.snapshot
    gang = settings.gangs and pod.group_key is not None
    promises, lapsed = request.promises.expire(now) if gang else (request.promises, ())
    admitted, hold = None, None
    # A member with a place (its own, or one its gang keeps for members not created yet) was admitted
    # with its gang.
    if not (gang and (pod.uid in promises.by_uid or has_stand_ins(pod.group_key or "", promises))):
        free = (room or RoomMemo()).free(snapshot, promises)
        hold = hold_for_queue(
            pod, snapshot, promises, request.view, request.admitted, now=now, free=free, tried=request.tried
        )
        if hold.held is not None:
            verdict = GroupVerdict(Verdict.QUEUE_HOLD, hold.held)
            rejection = verdict.rejection()
            rejected = MappingProxyType({n: rejection for n in dict.fromkeys(request.candidates)})
            return FilterOutcome(
                (), rejected, promises, verdict, lapsed=lapsed, unknown_queue=hold.unknown_queue, hold=hold
            )
        admitted = hold.admitted
    if not gang:
        fit = filter_nodes(pod, request.candidates, snapshot, promises)
        # A pod no node can take holds nothing, so it must not count against its queue (or it blocks others).
        kept = admitted if fit.feasible else None
        return FilterOutcome(fit.feasible, fit.rejected, promises, admitted=kept, hold=hold)
    key = pod.group_key or ""
    members = snapshot.members(key)
    if all(m.uid != pod.uid for m in members):
        members = [*members, pod]  # kube-scheduler can be a moment ahead of the driver's cache
    decided = decide_gang_member(
        pod,
        snapshot.podgroup(key),
        members,
        request.candidates,
        snapshot,
        promises,
        topologies,
        now=now,
        reservation_ttl=settings.reservation_ttl,
        locality_keys=settings.locality_keys,
        wall=request.wall,
    )
    return FilterOutcome(
        decided.feasible,
        decided.rejected,
        decided.promises,
        decided.verdict,
        admitted if decided.feasible else None,
        lapsed,
        decided.planned,
        hold=hold,
    )


def prioritize_pod(
    pod: Pod,
    candidates: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    topologies: TopologyCache,
    memo: ScoreMemo,
) -> tuple[tuple[str, int], ...]:
    """Integer 0..10 scores: GPU connectivity first, packing second (``scheduling.nodes.ranking``)."""
    return rank_nodes(pod, candidates, snapshot, promises, topologies, memo)


def choose_for_bind(
    pod: Pod,
    node: str,
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    *,
    now: float,
    settings: SessionSettings,
    topologies: TopologyCache,
) -> tuple[PromiseBook, Promise, tuple[Promise, ...]]:
    """Choose ``pod``'s GPU indices on ``node`` and promise them until the bound pod shows.

    A repeated bind of the same pod to the same node keeps its earlier promise, so a retried bind gets
    the same indices. Returns the new book, the promise, and the promises that lapsed meanwhile.

    Raises:
        NoGpusError: the node has no such free GPUs (taken since filter), or it left the cluster.
    """
    book, lapsed = promises.expire(now)
    earlier = book.by_uid.get(pod.uid)
    if earlier is not None and earlier.node == node:
        return book, earlier, lapsed
    book = book.release(pod.uid)
    info, free = snapshot.nodes.get(node), snapshot.free_on(node, book)
    if info is None or free is None:
        msg = "node left the cluster"
        raise NoGpusError(msg)
    gpus = choose_gpus(info, free, pod.requests.gpus, topologies)
    promise = Promise(pod.uid, pod.key, node, gpus, now + settings.promise_ttl, pod.requests)
    return book.add(promise), promise, lapsed


@dataclass(frozen=True, slots=True)
class GangBindTerms:
    """Whether a gang member may enter its bind barrier, and on what terms.

    Attributes:
        error: empty when it may, else the sentence that fails this bind.
        outcome: a stable name for metrics when it may not.
        promise: the member's reservation.
        group: the member's PodGroup.
        need: how many members must reach the barrier (``minMember`` less those already running).
        wait: how long the barrier waits for them: the bind wait, capped by the PodGroup's timeout.
    """

    error: str = ""
    outcome: str = ""
    promise: Promise | None = None
    group: PodGroup | None = None
    need: int = 0
    wait: float = 0.0


def gang_bind_terms(
    pod: Pod, node: str, snapshot: ClusterSnapshot, promises: PromiseBook, *, bind_wait: float
) -> GangBindTerms:
    """The terms of ``pod``'s bind to ``node``: it must hold its gang's reservation there."""
    key = pod.group_key or ""
    group = snapshot.podgroup(key)
    promise = promises.by_uid.get(pod.uid)
    if group is None or promise is None or promise.group != key:
        return GangBindTerms(
            f"gang {key}: {pod.name} has no reservation (it expired); it will be planned again",
            "no_reservation",
        )
    if promise.node != node:
        return GangBindTerms(
            f"gang {key}: {pod.name} is reserved on {promise.node}, not {node}", "wrong_node"
        )
    running = sum(1 for m in snapshot.members(key) if m.holds_resources)
    wait = min(bind_wait, float(group.timeout_seconds))
    return GangBindTerms(promise=promise, group=group, need=group.min_member - running, wait=wait)
