"""One pending group's verdict in the release pass: released now, or kept gated with the rule and why.

Rules 2 to 6 of ``scheduling.admission.release`` (members, the queue's rules, the in-flight budget,
room now with the starvation reserve, priority preemption), for one group, on the pass's walk
(``scheduling.admission.walk``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from scheduling.admission.outcome import (
    Kept,
    KeptRule,
    PodPlan,
    Released,
)
from scheduling.admission.preemption_room import plan_over, preemption_room
from scheduling.admission.reserve import Reservation, never_fits, reserve
from scheduling.admission.walk import PassFacts, Walk, gpus_of, keys_of, with_extra
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Pod, Resources
from scheduling.nodes.constraints import placement_rejection
from scheduling.queues import PendingGroup, check_rules
from scheduling.queues.reclaim_fit import group_pods
from scheduling.quota_owner import by_kueue
from scheduling.resources import format_quantity, total, within
from scheduling.timestamps import seconds

_LISTED = 3
"""Nodes named in a sentence before "and N more"."""

BY_KUEUE = "(Kueue)"
"""The queue of a group whose quota Kueue owns: no queue of phalanx's (no queue can be so named)."""


def kueue_groups_of(gated: Mapping[str, Sequence[Pod]], kueue: frozenset[str]) -> list[PendingGroup]:
    """The gated groups Kueue admitted (``scheduling.quota_owner``), oldest first.

    They owe phalanx's queues nothing, so they are decided before the fair order, under the room rules only.
    """
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


def decide(group: PendingGroup, gated: Sequence[Pod], walk: Walk, ctx: PassFacts) -> Released | Kept:
    """Release or keep one group of the fair order (rules 2 to 6 of the module docstring)."""
    snapshot, view, work, settings = ctx.snapshot, ctx.view, ctx.work, ctx.settings
    key = group.key
    pods = [p for p in group_pods(snapshot, key) if not p.terminating]
    podgroup = snapshot.podgroup(key) if gated[0].group_key is not None else None
    if podgroup is not None and len(pods) < podgroup.min_member:
        why = f"gang {key}: waiting for members: {len(pods)} of {podgroup.min_member} pods exist"
        return Kept(key, why, KeptRule.MEMBERS, gpus_of(pods))
    waiting = [p for p in pods if p.node_name is None and p.uid not in work.promises.by_uid]
    need = total(p.requests for p in waiting)
    state = None
    if group.queue != BY_KUEUE:  # Kueue's ClusterQueue already admitted it: no second quota check
        state = with_extra(view.state_of(group), walk.extra, walk.extra_np)
        answer = check_rules(replace(group, requests=need), state)
        if not answer.ok:
            return Kept(key, answer.reason, KeptRule.QUEUE, need.gpus)
    keys = keys_of(gated)
    single = podgroup is None and len(waiting) == 1 and not waiting[0].pinned
    where = _constraints(waiting[0])
    if (
        walk.unbound_pods
        and not settings.plan_on_pod
        and (
            walk.unbound_gpus + walk.kept_gpus + need.gpus > settings.max_unbound_gpus
            or walk.unbound_pods + len(waiting) > settings.max_unbound_pods
        )
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
            reason = f"{_admitted(group)}; fits now on {_listed(plan.nodes)}"
            ungating = frozenset(keys)
            members = plan.members
            ours = sorted(
                PodPlan(p.key, a.node, a.gpus)
                for a in plan.assignments
                if (p := members[a.uid]).key in ungating
            )
            if ctx.settings.plan_on_pod:
                return Released(key, keys, reason, plans=tuple(ours))
            nominated = podgroup is not None or len(snapshot.nodes) >= ctx.settings.nominate_from_nodes
            placed = tuple((p.pod, p.node) for p in ours) if nominated else ()
            return Released(key, keys, reason, placed)
        why = f"waits for room on one node: {plan.message}" if podgroup else _no_node(key, need)
        if walk.reservation is not None:
            why += f"; {_keeps(walk.reservation)}"
        if single:
            walk.no_node.append((where, need))
    lowest = ctx.candidates.lowest(group.queue) if podgroup is None and len(waiting) == 1 else None
    if lowest is not None and waiting[0].priority > lowest:
        preempt = preemption_room(
            waiting[0], ctx.snapshot, ctx.work, ctx.view.tree, ctx.candidates, now=ctx.now
        )
        if preempt is not None:
            walk.take(state, need, 1, preemptible=group.preemptible, room=False)
            node, victims = preempt
            count, queue = len(victims), group.queue
            reason = f"queue {queue}: admitted; may preempt {count} lower-priority pod(s) on node {node}"
            if ctx.settings.plan_on_pod:
                plans = plan_over(key, waiting[0], node, victims, ctx.snapshot, ctx.work, ctx.topologies)
                return Released(key, keys, reason, plans=plans)
            return Released(key, keys, reason)
    return _skipped(group, why, rule, waiting, walk, ctx)


def _skipped(
    group: PendingGroup, why: str, rule: KeptRule, waiting: Sequence[Pod], walk: Walk, ctx: PassFacts
) -> Kept:
    """Keep a group that does not fit now; the first that has waited past ``starve_after`` keeps nodes.

    A group that can never fit, on the cheap test (any group kept for room) or the whole one (the group
    about to keep nodes), keeps nothing and says so (``scheduling.admission.reserve``).
    """
    key, need = group.key, gpus_of(waiting)
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


ALLOWED_KEPT = 256
"""Sets of allowed nodes kept at most (``NodeFacts.allowed``, carried from pass to pass while no node
changes); past it the memo starts over, so varied constraints or a starving group's changing nodes
cannot grow it for as long as the nodes stay the same."""


def _allowed(pods: Sequence[Pod], ctx: PassFacts, reservation: Reservation | None) -> list[str]:
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
        if len(ctx.allowed) >= ALLOWED_KEPT:
            ctx.allowed.clear()
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
