"""Which gated groups the placement manager releases now: ungated, they enter kube-scheduler's queue.

Pods of scheduler ``phalanx`` are created with the scheduling gate ``phalanx.io/admission``
(``scheduling.model.ADMISSION_GATE``); kube-scheduler does not try them until it is removed. Without
it, every pod the extender turns down stays in kube-scheduler's queue and is retried round-robin, so with
thousands pending a round takes minutes and a gang reserved at its first member's filter idles its GPUs
until the other members' turn comes (docs/design/admission-gates.md has the numbers). With it, only
groups that can start now are in kube-scheduler's queue, and rounds are short. ``release`` decides, from
one snapshot, walking the pending groups in the fair order ``order_pending`` gives (``QueueView.pending``):

1. **Unknown or malformed groups are released**: a pod of another scheduler, a pod whose queue label
   names no leaf queue, a gang whose PodGroup does not exist ``unknown_group_grace`` seconds after the
   pod was created. phalanx cannot reason about them, and holding them would hide them with no sentence;
   ungated, the extender's own gates hold them and say why on the pod.
2. **Gangs go whole**: every gated member at once, and only once ``minMember`` pods exist.
3. **The queue's rules** (``scheduling.queues.admit``: limit, non-preemptible within quota), counting
   what groups released but not yet bound will hold.
4. **Short kube-scheduler queue**: at most ``max_unbound_gpus`` GPUs and ``max_unbound_pods`` pods
   released and not yet bound (one group is always allowed when none is in flight, however big).
5. **Room now**: the GPUs free after promises, less what released-but-unbound groups need, must cover
   the group, and the gang planner must place it on the nodes' real room (``plan_gang`` on a
   ``Statement`` that holds every group released before it, so fragmentation counts). A group that does
   not fit is skipped: those behind it may go (work-conserving, like Kueue's BestEffortFIFO). But the
   first skipped group that has waited longer than ``starve_after`` keeps the nodes it will start on
   (``scheduling.admission.reserve``): nothing behind it is placed there, so a big gang is not starved
   by a stream of small ones, while every other node keeps serving them. A group that cannot be placed
   even on the schedulable nodes emptied keeps nothing: it is marked as never fitting.
Groups whose quota Kueue owns (admitted by Kueue, ``scheduling.quota_owner``; docs/kueue.md) skip rule 3:
Kueue's ClusterQueue already admitted them, and a second quota check would be double accounting. They
go first, oldest first (Kueue admitted them and counts them as running), under rules 2, 4 and 5.

6. **Priority preemption**: a pod on its own that could start by preempting lower-priority pods of its
   own queue (``scheduling.preempt_session.narrow_victims`` decides which, on one node) is released, or
   gating it would disable kube-scheduler's preemption. It counts against its queue and the in-flight
   budget but takes no free room (it takes its victims'). Gangs are not: the extender turns a gang down
   as unresolvable (no per-pod preemption can make room for a whole gang); reclaim is their way.

Every kept group carries its rule (``KeptRule``). The GPUs free at the end of the walk (after what is in
flight and what the pass released) are idle while groups wait; ``idle`` attributes them to the kept
groups in the fair order, each taking at most what it needs, under its rule, and the GPUs held for
groups released but not bound yet under ``in_flight``: the placement manager exports them, so an
operator sees which rule keeps GPUs idle.

The per-node check knows what the core models: GPU indices, CPU, memory, pins, and kube-scheduler's
taint, node-selector and required-affinity filters (``scheduling.nodes.constraints``; a gang is offered
the nodes at least one of its members may use). What it does not model (inter-pod affinity, topology
spread, volumes) can still keep a released group waiting in kube-scheduler; it then counts as in
flight for ``release_ttl`` seconds at most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain

from scheduling.admission.flight import ReleasedBook, in_flight, seconds
from scheduling.admission.outcome import (
    DEFAULT_GATE_SETTINGS,
    GateSettings,
    Kept,
    KeptRule,
    Released,
    ReleaseDecision,
)
from scheduling.admission.preemption_room import preemption_room, queue_of
from scheduling.admission.reserve import Capacity, Reservation, never_fits, reserve
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.gang.planner import GangPlan, plan_gang
from scheduling.model import SCHEDULER_NAME, Pod, Resources
from scheduling.nodes.constraints import placement_rejection
from scheduling.queues import QUEUE_LABEL, PendingGroup, QueueError, QueueState, admit
from scheduling.queues.reclaim_fit import group_pods
from scheduling.queues.view import QueueView, group_key
from scheduling.quota_owner import by_kueue, kueue_groups
from scheduling.resources import ZERO, format_quantity, plus, total, within
from scheduling.topology import TopologyCache

__all__ = ["GateSettings", "Kept", "KeptRule", "ReleaseDecision", "Released", "ReleasedBook", "release"]

_LISTED = 3

_TOP = 2**63
"""Above every priority: a queue with no running pod has no victim for anyone."""

_NOT_IN_VIEW = "waits for the next queue view (the pod is newer than it)"


@dataclass(frozen=True, slots=True)
class _Pass:
    """What one pass reads: the facts, and the working copy its releases are placed on."""

    snapshot: ClusterSnapshot
    view: QueueView
    work: Statement
    nodes: tuple[str, ...]
    running: Mapping[str, tuple[Pod, ...]]  # by queue: the pods preemption may consider
    lowest: Mapping[str, int]  # by queue: the lowest priority among them (none lower: no preemption)
    topologies: TopologyCache
    now: float
    settings: GateSettings
    capacity: Capacity
    kueue: frozenset[str]  # the gangs whose quota Kueue owns (``scheduling.quota_owner``)
    allowed: dict[tuple[object, ...], list[str]] = field(default_factory=dict)  # memo of ``_allowed``


@dataclass
class _Walk:
    """What the walk has used so far: room, the in-flight budget, and queue allocations to add."""

    room: int
    unbound_gpus: int
    unbound_pods: int
    ahead: int
    extra: dict[str, Resources]
    extra_np: dict[str, Resources]
    flight_gpus: int = 0  # GPUs of the groups released by earlier passes and not bound yet
    reservation: Reservation | None = None  # the nodes the starving group keeps
    no_node: list[tuple[object, Resources]] = field(default_factory=list)  # single pods no node took

    @property
    def kept_gpus(self) -> int:
        """The free GPUs the starving group keeps from the room count."""
        return self.reservation.gpus if self.reservation is not None else 0

    def take(
        self, state: QueueState | None, need: Resources, pods: int, *, preemptible: bool, room: bool
    ) -> None:
        if room:
            self.room -= need.gpus
        self.unbound_gpus += need.gpus
        self.unbound_pods += pods
        self.ahead += 1
        for queue in state.path() if state is not None else ():
            self.extra[queue.name] = plus(self.extra.get(queue.name, ZERO), need)
            if not preemptible:
                self.extra_np[queue.name] = plus(self.extra_np.get(queue.name, ZERO), need)


def release(
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    view: QueueView,
    book: ReleasedBook,
    topologies: TopologyCache,
    *,
    now: float,
    settings: GateSettings = DEFAULT_GATE_SETTINGS,
) -> ReleaseDecision:
    """Decide which gated groups to release now (see the module docstring for the rules, in order).

    Args:
        snapshot: the cluster now; pods carry ``gated``.
        promises: the open promises (gang reservations, binds in flight).
        view: the queue view built from this snapshot (``view_of``): the fair order and queue states.
        book: groups released by earlier passes, with when.
        topologies: the topology cache the gang planner scores GPU sets with.
        now: the caller's clock, in the seconds of ``book``.
        settings: the limits above.
    """
    live = [p for p in snapshot.queue_pod_list() if not p.terminating]  # every pod the rules below read
    gated: dict[str, list[Pod]] = {}
    for pod in live:
        if pod.gated and pod.node_name is None:
            gated.setdefault(group_key(pod), []).append(pod)
    flight = in_flight(live, book, promises, now=now, ttl=settings.release_ttl)
    kueue = kueue_groups(live)
    running: dict[str, list[Pod]] = {}
    for pod in live:
        if pod.holds_resources and pod.scheduler_name == SCHEDULER_NAME and not by_kueue(pod, kueue):
            queue = queue_of(pod, view.tree)
            if queue is not None:
                running.setdefault(queue, []).append(pod)
    ctx = _Pass(
        snapshot,
        view,
        Statement(snapshot, promises),
        tuple(sorted(snapshot.nodes)),
        {queue: tuple(pods) for queue, pods in running.items()},
        {queue: min(p.priority for p in pods) for queue, pods in running.items()},
        topologies,
        now,
        settings,
        Capacity.of(snapshot.nodes.values()),
        kueue,
    )
    walk = _Walk(snapshot.free_total(promises).gpus, 0, 0, 0, {}, {})
    for key, pods in sorted(flight.counting.items()):
        if not any(p.key in view.misplaced for p in pods):  # released to be turned down: never binds
            _count_in_flight(key, pods, walk, ctx)
    released: list[Released] = []
    kept: list[Kept] = []
    for key in sorted(gated):
        unknown = _unknown(key, gated[key], snapshot, view, now=now, grace=settings.unknown_group_grace)
        if unknown is not None:
            if unknown[0]:
                released.append(Released(key, _keys(gated[key]), unknown[1]))
            else:
                kept.append(Kept(key, unknown[1], KeptRule.UNKNOWN, _gpus(gated[key])))
            del gated[key]
    for group in chain(_kueue_groups(gated, kueue), view.pending):
        if group.key in gated:
            answer = _decide(group, gated.pop(group.key), walk, ctx)
            if isinstance(answer, Kept):
                kept.append(answer)
            else:
                released.append(answer)
    kept.extend(Kept(key, _NOT_IN_VIEW, KeptRule.VIEW, _gpus(gated[key])) for key in sorted(gated))
    idle = _idle(walk, kept)
    return ReleaseDecision(
        tuple(released), tuple(kept), flight.book.with_released((r.group for r in released), now), idle
    )


def _gpus(pods: Sequence[Pod]) -> int:
    return sum(p.requests.gpus for p in pods)


def _idle(walk: _Walk, kept: Sequence[Kept]) -> dict[str, int]:
    """The GPUs free after the walk, attributed to the kept groups' rules in order (module docstring)."""
    left = max(0, walk.room)
    idle: dict[str, int] = {}
    if walk.flight_gpus and kept:
        idle["in_flight"] = walk.flight_gpus
    if walk.reservation is not None and left:
        take = min(left, walk.reservation.gpus)
        idle[KeptRule.STARVING.value] = take
        left -= take
    for group in kept:
        if not left:
            break
        take = min(left, group.gpus)
        if take and group.rule is not KeptRule.STARVING:
            idle[group.rule.value] = idle.get(group.rule.value, 0) + take
            left -= take
    return idle


def _keys(pods: Sequence[Pod]) -> tuple[str, ...]:
    return tuple(sorted(p.key for p in pods))


def _unknown(
    key: str, pods: Sequence[Pod], snapshot: ClusterSnapshot, view: QueueView, *, now: float, grace: float
) -> tuple[bool, str] | None:
    """For a group phalanx cannot reason about: (released?, why); ``None`` for every other group."""
    if any(p.scheduler_name != SCHEDULER_NAME for p in pods):
        return True, f"not a pod of scheduler {SCHEDULER_NAME}; released so that its own scheduler decides"
    misplaced = [view.misplaced[p.key] for p in pods if p.key in view.misplaced]
    if misplaced:
        return True, f"{misplaced[0]}; released so that the extender turns it down with this reason"
    if pods[0].group_key is not None and snapshot.podgroup(key) is None:
        age = now - min((seconds(p.created) or now) for p in pods)
        if age < grace:
            return (
                False,
                f"waits for PodGroup {key} to be created ({age:.0f}s so far, released after {grace:g}s)",
            )
        return True, f"PodGroup {key} does not exist; released so that the extender's gang gate says so"
    return None


def _count_in_flight(key: str, pods: Sequence[Pod], walk: _Walk, ctx: _Pass) -> None:
    """Count a released, unbound group: its GPUs out of the room, its pods on the nodes if they fit."""
    need = total(p.requests for p in pods)
    walk.room -= need.gpus
    walk.flight_gpus += need.gpus
    walk.unbound_gpus += need.gpus
    walk.unbound_pods += len(pods)
    walk.ahead += 1
    work, tree = ctx.work, ctx.view.tree
    plan_gang(key, pods, ctx.nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work)
    if by_kueue(pods[0], ctx.kueue):  # in flight, it takes room, but it charges no queue of phalanx's
        return
    try:
        queue = tree.workload_queue(pods[0].labels.get(QUEUE_LABEL))
    except QueueError:
        return
    for name in tree.path(queue):
        walk.extra[name] = plus(walk.extra.get(name, ZERO), need)


def _decide(group: PendingGroup, gated: Sequence[Pod], walk: _Walk, ctx: _Pass) -> Released | Kept:
    """Release or keep one group of the fair order (rules 2 to 6 of the module docstring)."""
    snapshot, view, work, settings = ctx.snapshot, ctx.view, ctx.work, ctx.settings
    key = group.key
    pods = [p for p in group_pods(snapshot, key) if not p.terminating]
    podgroup = snapshot.podgroup(key) if gated[0].group_key is not None else None
    if podgroup is not None and len(pods) < podgroup.min_member:
        why = f"gang {key}: waiting for members: {len(pods)} of {podgroup.min_member} pods exist"
        return Kept(key, why, KeptRule.MEMBERS, _gpus(pods))
    waiting = [p for p in pods if p.node_name is None and p.uid not in work.promises.by_uid]
    need = total(p.requests for p in waiting)
    state = None
    if group.queue != BY_KUEUE:
        state = _with_extra(view.state_of(group), walk.extra, walk.extra_np)
        answer = admit(replace(group, requests=need), state)
        if not answer.ok:
            return Kept(key, answer.reason, KeptRule.QUEUE, need.gpus)
    keys = _keys(gated)
    single = podgroup is None and len(waiting) == 1 and not waiting[0].pinned
    where = _constraints(waiting[0])
    if walk.unbound_pods and (
        walk.unbound_gpus + walk.kept_gpus + need.gpus > settings.max_unbound_gpus
        or walk.unbound_pods + len(waiting) > settings.max_unbound_pods
    ):
        why = (
            f"waits its turn: {format_quantity('nvidia.com/gpu', walk.unbound_gpus)} and {walk.unbound_pods} "
            f"pod(s) released and not yet bound (at most {settings.max_unbound_gpus} GPUs, "
            f"{settings.max_unbound_pods} pods)"
        )
        return _skipped(group, why, KeptRule.BUDGET, waiting, walk, ctx)
    rule = KeptRule.NODE
    if need.gpus > walk.room - walk.kept_gpus:
        why = (
            f"waits for room: needs {format_quantity('nvidia.com/gpu', need.gpus)}, "
            f"{max(0, walk.room - walk.kept_gpus)} free after {walk.ahead} group(s) ahead"
        )
        rule = KeptRule.ROOM
        if walk.reservation is not None:
            why += f"; {_keeps(walk.reservation)}"
            rule = KeptRule.STARVING if need.gpus <= walk.room else rule
    elif single and any(c == where and within(failed, need) for c, failed in walk.no_node):
        # Room only shrinks during a pass: a pod no larger, allowed the same nodes, found none.
        why = _no_node(key, need)
    else:
        allowed = _allowed(waiting, ctx, walk.reservation)
        plan = plan_gang(key, waiting, allowed, snapshot, work.promises, ctx.topologies, statement=work)
        if isinstance(plan, GangPlan):
            walk.take(state, need, len(waiting), preemptible=group.preemptible, room=True)
            return Released(key, keys, f"{_admitted(group)}; fits now on {_listed(plan.nodes)}")
        why = f"waits for room on one node: {plan.message}" if podgroup else _no_node(key, need)
        if walk.reservation is not None:
            why += f"; {_keeps(walk.reservation)}"
        if single:
            walk.no_node.append((where, need))
    if podgroup is None and len(waiting) == 1 and waiting[0].priority > ctx.lowest.get(group.queue, _TOP):
        preempt = preemption_room(waiting[0], ctx.snapshot, ctx.work, ctx.view.tree, ctx.running, now=ctx.now)
        if preempt is not None:
            walk.take(state, need, 1, preemptible=group.preemptible, room=False)
            node, count = preempt
            reason = (
                f"queue {group.queue}: admitted; may preempt {count} lower-priority pod(s) on node {node}"
            )
            return Released(key, keys, reason)
    return _skipped(group, why, rule, waiting, walk, ctx)


BY_KUEUE = "(Kueue)"
"""The queue of a group whose quota Kueue owns: no queue of phalanx's (no queue can be so named)."""


def _kueue_groups(gated: Mapping[str, Sequence[Pod]], kueue: frozenset[str]) -> list[PendingGroup]:
    """The gated groups Kueue admitted, oldest first: they owe phalanx's queues nothing."""
    groups = [
        PendingGroup(
            key,
            BY_KUEUE,
            total(p.requests for p in pods),
            max(p.priority for p in pods),
            min(p.created for p in pods),
            preemptible=False,  # only Kueue preempts what it admitted
        )
        for key, pods in gated.items()
        if pods and by_kueue(pods[0], kueue)
    ]
    return sorted(groups, key=lambda g: (g.created, g.key))


def _admitted(group: PendingGroup) -> str:
    if group.queue == BY_KUEUE:
        return "admitted by Kueue (its ClusterQueue holds the quota)"
    return f"queue {group.queue}: admitted"


def _skipped(
    group: PendingGroup, why: str, rule: KeptRule, waiting: Sequence[Pod], walk: _Walk, ctx: _Pass
) -> Kept:
    """Keep a group that does not fit now; the first that has waited past ``starve_after`` keeps nodes.

    A group that can never fit, on the cheap test (any group kept for room) or the whole one (the group
    about to keep nodes), keeps nothing and says so (``scheduling.admission.reserve``).
    """
    key, need = group.key, _gpus(waiting)
    never = ctx.capacity.shortfall(waiting) if rule in (KeptRule.ROOM, KeptRule.NODE) else None
    waited = ctx.now - (seconds(group.created) or ctx.now)
    if never is None and walk.reservation is None and waited > ctx.settings.starve_after:
        allowed = _allowed(waiting, ctx, None)
        never = never_fits(key, waiting, allowed, ctx.snapshot, ctx.topologies)
        if never is None:
            walk.reservation = reserve(key, waiting, ctx.work.rooms(allowed), waited)
            nodes = sorted(walk.reservation.nodes)
            return Kept(
                key,
                f"{why}; it has waited {waited:.0f}s, so it keeps {_listed(nodes)} from the groups behind it",
                rule,
                need,
            )
    if never is not None:
        return Kept(key, f"can never be placed on this cluster as it is: {never}", KeptRule.NEVER, need)
    return Kept(key, why, rule, need)


def _keeps(reservation: Reservation) -> str:
    return (
        f"{reservation.group} (waiting {reservation.waited:.0f}s) keeps {len(reservation.nodes)} node(s) "
        f"with {reservation.gpus} free GPU(s)"
    )


def _allowed(pods: Sequence[Pod], ctx: _Pass, reservation: Reservation | None) -> list[str]:
    """The nodes kube-scheduler's filters leave to at least one of ``pods``, less a starving group's.

    The filters are taints, node selector and required affinity (``scheduling.nodes.constraints``).
    """
    kept = reservation.nodes if reservation is not None else frozenset()
    wants = {_constraints(p): p for p in pods}  # equal constraints allow equal nodes
    key = (kept, *sorted(wants, key=repr))
    found = ctx.allowed.get(key)
    if found is None:
        nodes, distinct = ctx.snapshot.nodes, list(wants.values())
        found = [
            n
            for n in ctx.nodes
            if n not in kept and any(placement_rejection(p, nodes[n]) is None for p in distinct)
        ]
        ctx.allowed[key] = found
    return found


def _constraints(pod: Pod) -> object:
    """What decides the nodes kube-scheduler's filters leave to ``pod``: equal for equal sets of nodes."""
    return (tuple(sorted(pod.node_selector.items())), pod.affinity, pod.tolerations)


def _no_node(key: str, need: Resources) -> str:
    gpus = format_quantity("nvidia.com/gpu", need.gpus)
    return f"waits for room on one node: no node has room for {key} now ({gpus})"


def _listed(names: Sequence[str]) -> str:
    text = ", ".join(names[:_LISTED])
    more = len(names) - _LISTED
    return f"{len(names)} node(s) ({text}{f' and {more} more' if more > 0 else ''})"


def _with_extra(
    state: QueueState, extra: Mapping[str, Resources], extra_np: Mapping[str, Resources]
) -> QueueState:
    """``state`` with what this pass released (and groups in flight) added along its path."""
    if not any(queue.name in extra for queue in state.path()):
        return state  # nothing added on its path: the view's own state (most groups of a pass)
    parent = None if state.parent is None else _with_extra(state.parent, extra, extra_np)
    return replace(
        state,
        allocated=plus(state.allocated, extra.get(state.name, ZERO)),
        allocated_non_preemptible=plus(state.allocated_non_preemptible, extra_np.get(state.name, ZERO)),
        parent=parent,
    )
