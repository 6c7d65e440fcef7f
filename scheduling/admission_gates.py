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
   first skipped group that has waited longer than ``starve_after`` keeps its GPUs: nothing behind it
   that would take them is released, so a big gang is not starved by a stream of small ones.
6. **Priority preemption**: a pod on its own that could start by preempting lower-priority pods of its
   own queue (``scheduling.preempt_session.narrow_victims`` decides which, on one node) is released, or
   gating it would disable kube-scheduler's preemption. It counts against its queue and the in-flight
   budget but takes no free room (it takes its victims'). Gangs are not: the extender turns a gang down
   as unresolvable (no per-pod preemption can make room for a whole gang); reclaim is their way.

The per-node check knows what the core models: GPU indices, CPU, memory, pins, and kube-scheduler's
taint, node-selector and required-affinity filters (``scheduling.node_constraints``; a gang is offered
the nodes at least one of its members may use). What it does not model (inter-pod affinity, topology
spread, volumes) can still keep a released group waiting in kube-scheduler; it then counts as in
flight for ``release_ttl`` seconds at most.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduling.admission_flight import ReleasedBook, in_flight, seconds
from scheduling.admission_outcome import DEFAULT_GATE_SETTINGS, GateSettings, Kept, Released, ReleaseDecision
from scheduling.admission_preemption import preemption_room, queue_of
from scheduling.gang_planner import GangPlan, plan_gang
from scheduling.model import SCHEDULER_NAME, Pod, Resources
from scheduling.node_constraints import placement_rejection
from scheduling.promises import PromiseBook
from scheduling.queue_view import QueueView, group_key
from scheduling.queues import QUEUE_LABEL, PendingGroup, QueueError, QueueState, admit
from scheduling.reclaim_fit import group_pods
from scheduling.resources import ZERO, format_quantity, plus, total, within
from scheduling.snapshot import ClusterSnapshot
from scheduling.statement import Statement
from scheduling.topology import TopologyCache

__all__ = ["GateSettings", "Kept", "ReleaseDecision", "Released", "ReleasedBook", "release"]

_LISTED = 3


@dataclass(frozen=True, slots=True)
class _Pass:
    """What one pass reads: the facts, and the working copy its releases are placed on."""

    snapshot: ClusterSnapshot
    view: QueueView
    work: Statement
    nodes: tuple[str, ...]
    running: Mapping[str, tuple[Pod, ...]]  # by queue: the pods preemption may consider
    topologies: TopologyCache
    now: float
    settings: GateSettings


@dataclass
class _Walk:
    """What the walk has used so far: room, the in-flight budget, and queue allocations to add."""

    room: int
    unbound_gpus: int
    unbound_pods: int
    ahead: int
    extra: dict[str, Resources]
    extra_np: dict[str, Resources]
    kept_for: tuple[str, int, float] | None = None  # (group, GPUs, seconds waited) of the starving one
    no_node: list[tuple[object, Resources]] = field(default_factory=list)  # single pods no node took

    def take(self, state: QueueState, need: Resources, pods: int, *, preemptible: bool, room: bool) -> None:
        if room:
            self.room -= need.gpus
        self.unbound_gpus += need.gpus
        self.unbound_pods += pods
        self.ahead += 1
        for queue in state.path():
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
    running: dict[str, list[Pod]] = {}
    for pod in live:
        if pod.holds_resources and pod.scheduler_name == SCHEDULER_NAME:
            queue = queue_of(pod, view.tree)
            if queue is not None:
                running.setdefault(queue, []).append(pod)
    ctx = _Pass(
        snapshot,
        view,
        Statement(snapshot, promises),
        tuple(sorted(snapshot.nodes)),
        {queue: tuple(pods) for queue, pods in running.items()},
        topologies,
        now,
        settings,
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
                kept.append(Kept(key, unknown[1]))
            del gated[key]
    for group in view.pending:
        if group.key in gated:
            answer = _decide(group, gated.pop(group.key), walk, ctx)
            if isinstance(answer, Kept):
                kept.append(answer)
            else:
                released.append(answer)
    kept.extend(
        Kept(key, "waits for the next queue view (the pod is newer than it)") for key in sorted(gated)
    )
    return ReleaseDecision(
        tuple(released), tuple(kept), flight.book.with_released((r.group for r in released), now)
    )


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
    walk.unbound_gpus += need.gpus
    walk.unbound_pods += len(pods)
    walk.ahead += 1
    work, tree = ctx.work, ctx.view.tree
    plan_gang(key, pods, ctx.nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work)
    try:
        queue = tree.workload_queue(pods[0].labels.get(QUEUE_LABEL))
    except QueueError:
        return
    for name in tree.path(queue):
        walk.extra[name] = plus(walk.extra.get(name, ZERO), need)


def _decide(group: PendingGroup, gated: Sequence[Pod], walk: _Walk, ctx: _Pass) -> Released | Kept:
    """Release or keep one group of the fair order (rules 2 to 6 of the module docstring)."""
    snapshot, view, work, settings, now = ctx.snapshot, ctx.view, ctx.work, ctx.settings, ctx.now
    key = group.key
    pods = [p for p in group_pods(snapshot, key) if not p.terminating]
    podgroup = snapshot.podgroup(key) if gated[0].group_key is not None else None
    if podgroup is not None and len(pods) < podgroup.min_member:
        return Kept(key, f"gang {key}: waiting for members: {len(pods)} of {podgroup.min_member} pods exist")
    waiting = [p for p in pods if p.node_name is None and p.uid not in work.promises.by_uid]
    need = total(p.requests for p in waiting)
    state = _with_extra(view.state_of(group), walk.extra, walk.extra_np)
    answer = admit(replace(group, requests=need), state)
    if not answer.ok:
        return Kept(key, answer.reason)
    keys = _keys(gated)
    single = podgroup is None and len(waiting) == 1 and not waiting[0].pinned
    where = _constraints(waiting[0])
    kept_gpus = walk.kept_for[1] if walk.kept_for else 0
    if walk.unbound_pods and (
        walk.unbound_gpus + kept_gpus + need.gpus > settings.max_unbound_gpus
        or walk.unbound_pods + len(waiting) > settings.max_unbound_pods
    ):
        why = (
            f"waits its turn: {format_quantity('nvidia.com/gpu', walk.unbound_gpus)} and {walk.unbound_pods} "
            f"pod(s) released and not yet bound (at most {settings.max_unbound_gpus} GPUs, "
            f"{settings.max_unbound_pods} pods)"
        )
        return _skipped(key, group, why, walk, need, now, settings)
    if need.gpus > walk.room - kept_gpus:
        why = (
            f"waits for room: needs {format_quantity('nvidia.com/gpu', need.gpus)}, "
            f"{max(0, walk.room)} free after {walk.ahead} group(s) ahead"
        )
        if walk.kept_for is not None:
            starving, _, waited = walk.kept_for
            why += f"; {starving} (waiting {waited:.0f}s) keeps the {kept_gpus} it needs"
    elif single and any(c == where and within(failed, need) for c, failed in walk.no_node):
        # Room only shrinks during a pass: a pod no larger, allowed the same nodes, found none.
        why = _no_node(key, need)
    else:
        plan = plan_gang(
            key, waiting, _allowed(waiting, ctx), snapshot, work.promises, ctx.topologies, statement=work
        )
        if isinstance(plan, GangPlan):
            walk.take(state, need, len(waiting), preemptible=group.preemptible, room=True)
            return Released(key, keys, f"queue {group.queue}: admitted; fits now on {_listed(plan.nodes)}")
        why = f"waits for room on one node: {plan.message}" if podgroup else _no_node(key, need)
        if single:
            walk.no_node.append((where, need))
    if podgroup is None and len(waiting) == 1:
        preempt = preemption_room(waiting[0], ctx.snapshot, ctx.work, ctx.view.tree, ctx.running, now=ctx.now)
        if preempt is not None:
            walk.take(state, need, 1, preemptible=group.preemptible, room=False)
            node, count = preempt
            reason = (
                f"queue {group.queue}: admitted; may preempt {count} lower-priority pod(s) on node {node}"
            )
            return Released(key, keys, reason)
    return _skipped(key, group, why, walk, need, now, settings)


def _skipped(
    key: str, group: PendingGroup, why: str, walk: _Walk, need: Resources, now: float, settings: GateSettings
) -> Kept:
    """Keep a group that does not fit; the first that has waited past ``starve_after`` keeps its GPUs."""
    waited = now - (seconds(group.created) or now)
    if walk.kept_for is None and waited > settings.starve_after:
        walk.kept_for = (key, need.gpus, waited)
        why += f"; it has waited {waited:.0f}s, so no group behind it takes its GPUs"
    return Kept(key, why)


def _allowed(pods: Sequence[Pod], ctx: _Pass) -> list[str]:
    """The nodes kube-scheduler's filters (taints, selector, affinity) leave to at least one of ``pods``."""
    nodes = ctx.snapshot.nodes
    return [n for n in ctx.nodes if any(placement_rejection(p, nodes[n]) is None for p in pods)]


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
    parent = None if state.parent is None else _with_extra(state.parent, extra, extra_np)
    return replace(
        state,
        allocated=plus(state.allocated, extra.get(state.name, ZERO)),
        allocated_non_preemptible=plus(state.allocated_non_preemptible, extra_np.get(state.name, ZERO)),
        parent=parent,
    )
