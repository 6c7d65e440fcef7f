"""Plans in flight held on the release pass's working copy, or made again when they no longer hold.

With plans carried on pods (the framework sidecar: docs/design/framework-sidecar.md), kube-scheduler
binds every pod released and not bound yet exactly where its plan says, whenever it tries it. So every
gate decision holds those plans on its working copy first (their GPUs are no one else's), and plans
again the pods whose plans broke (a pod bound since took a planned GPU, the node went) or that
kube-scheduler keeps turning down for what the core does not model; the new plans are written on the
pods (``ReleaseDecision.replanned``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.admission.flight import InFlight
from scheduling.admission.outcome import PodPlan
from scheduling.admission.walk import PassFacts, Walk
from scheduling.cluster.ledger import Flight
from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Pod, group_key


def hold_plans(flight: InFlight, unheld: Mapping[str, Pod], walk: Walk, ctx: PassFacts) -> None:
    """Keep each in-flight pod's plan on the working copy; plan again those whose plan no longer holds.

    Every released, unbound pod is held but ``unheld`` (by key: the promised pods of groups that count,
    and the pods turned down as misplaced). A plan holds while its node still has room for the pod and
    every planned GPU index is free there (nothing bound there since took one), and kube-scheduler has
    not refused it (``refused_now``). Every plan that may hold is held first, on the rooms ``HeldPlans``
    keeps per node between decisions (``scheduling.cluster.held``), from the pods the ledger keeps per
    planned node, so a decision works again only on the nodes that changed. Then, group by group, a pod
    whose plan does not hold, or that has none (released before plans were carried), is planned again
    with the rest of its group's such pods, away from every node it was refused on, and the new plan
    is written on it (``Walk.replanned``); the sidecar's plugin then tries it again. One that finds no
    place keeps its plan, and kube-scheduler keeps saying why it cannot bind. When every node has
    refused it, its refusals are forgotten and it is planned as if new.
    """
    waiting = flight.waiting
    flights = waiting.released
    troubled = {  # groups with a held pod that has no plan
        key
        for key in waiting.unplanned
        if any(p.plan is None and p.key not in unheld for p in flights[key].pods)
    }
    off: dict[str, set[str]] = {}  # node -> pods planned there not held there
    for pod in unheld.values():
        if pod.plan is not None:
            off.setdefault(pod.plan[0], set()).add(pod.key)
    suspects = dict(waiting.unschedulable)  # refused_now asks of these only
    for key in ctx.refused:
        named = ctx.snapshot.pod(*key.split("/", 1))
        if named is not None and key not in suspects and _in_flight(named, flights):
            suspects[key] = named
    for key in sorted(suspects):
        pod = suspects[key]
        plan = pod.plan
        if plan is None or key in unheld:
            continue
        refused = ctx.refused.get(key)
        if refused_now(pod, ctx.now, ctx.settings.plan_refused_after):
            refused = walk.refused[key] = (refused or frozenset()) | {plan[0]}
        if refused is not None and plan[0] in refused:
            troubled.add(group_key(pod))
            off.setdefault(plan[0], set()).add(key)
    planned: Mapping[str, Sequence[Pod]] = waiting.planned
    if off:
        edited = dict(planned)
        for node, keys in off.items():
            kept = tuple(p for p in edited.get(node, ()) if p.key not in keys)
            if kept:
                edited[node] = kept
            else:
                edited.pop(node, None)
        planned = edited
    broken = ctx.work.held.hold(ctx.work, planned)
    for key in broken:
        named = ctx.snapshot.pod(*key.split("/", 1))
        if named is not None:
            troubled.add(group_key(named))
    for key in sorted(troubled):
        pods = [p for p in flights[key].pods if p.key not in unheld]
        _plan_again(key, pods, broken, walk, ctx)


def _in_flight(pod: Pod, flights: Mapping[str, Flight]) -> bool:
    """Whether ``pod`` is one of a released group's pods, as the ledger has them."""
    flight = flights.get(group_key(pod))
    return flight is not None and any(p is pod for p in flight.pods)


def _plan_again(key: str, pods: Sequence[Pod], broken: frozenset[str], walk: Walk, ctx: PassFacts) -> None:
    """Plan again, together, the pods of group ``key`` whose plans do not hold (``hold_plans``)."""
    work = ctx.work
    lost: dict[str, str] = {}  # pod key -> why it is planned again
    shunned: set[str] = set()
    for pod in pods:
        plan = pod.plan
        refused = walk.refused.get(pod.key, ctx.refused.get(pod.key, frozenset()))
        if plan is not None and plan[0] not in refused and pod.key not in broken:
            continue  # held
        if plan is not None and _preempting(pod, plan[0], refused, work):
            continue  # its GPUs are its victims' until they are gone; then the plan holds
        lost[pod.key] = _why(pod, refused, work)
        shunned |= refused
    if not lost:
        return
    nodes = tuple(n for n in ctx.nodes if n not in shunned)
    if not nodes:  # refused everywhere: what kube-scheduler refused may have changed since
        nodes = ctx.nodes
        walk.refused.update((pod, frozenset()) for pod in lost)
    again_pods = [pod for pod in pods if pod.key in lost]
    again = plan_gang(key, again_pods, nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work)
    if isinstance(again, GangPlan):
        keys = {uid: pod.key for uid, pod in again.members.items()}
        walk.replanned.extend(
            sorted(PodPlan(keys[a.uid], a.node, a.gpus, lost[keys[a.uid]]) for a in again.assignments)
        )


def _preempting(pod: Pod, node: str, refused: frozenset[str], work: Statement) -> bool:
    """Whether kube-scheduler preempted on ``node`` for ``pod`` (it nominated the pod there).

    Such a plan is kept as it is while the victims leave (``preemption_room.plan_over``): planned
    anywhere else, kube-scheduler could preempt a second time for it.
    """
    return pod.nominated_node == node and node not in refused and work.room(node) is not None


def _why(pod: Pod, refused: frozenset[str], work: Statement) -> str:
    """Why ``pod``'s carried plan does not hold on the working copy (``hold_plans`` found it does not)."""
    plan = pod.plan
    if plan is None:
        return "it had no plan (released before plans were carried, or to preempt)"
    node = plan[0]
    if node in refused:
        return f"kube-scheduler kept turning its plan on {node} down, for what phalanx does not model"
    if work.room(node) is None:
        return f"its plan's node {node} is gone or cannot take pods"
    return f"its plan on {node} no longer held: a planned GPU or the room was taken since"


def refused_now(pod: Pod, now: float, after: float) -> bool:
    """Whether kube-scheduler turned ``pod``'s carried plan down, as far as the pass can tell.

    It did when the plan was sealed ``after`` seconds ago or more and kube-scheduler's last try found
    no node (``Pod.unschedulable``). By then kube-scheduler has tried the plan (its queue retries a
    turned-down pod within 10 s, and at once when its plan changes), so the verdict is the plan's,
    not a former plan's. A pod kube-scheduler nominated to its plan's node has had lower-priority pods
    preempted there for it (``preemption_room.plan_over``) and waits for them to go: not refused.
    """
    if pod.plan is not None and pod.nominated_node == pod.plan[0]:
        return False
    return pod.unschedulable and pod.planned_at is not None and now - pod.planned_at >= after
