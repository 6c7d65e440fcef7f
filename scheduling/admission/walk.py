"""The release pass's walk: what it reads once, and what the groups released so far have used.

``scheduling.admission.release`` walks the pending groups in their fair order; each group's verdict
(``scheduling.admission.verdict``) reads the pass's facts (``PassFacts``) and takes room, in-flight
budget and queue allocation from the walk (``Walk``) when it is released. At the end the GPUs still
free are attributed to the rules that kept groups waiting (``idle_by_rule``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduling.admission.outcome import (
    GateSettings,
    Kept,
    KeptRule,
    PodPlan,
)
from scheduling.admission.preemption_room import Candidates
from scheduling.admission.reserve import Capacity, Reservation
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Pod, Resources
from scheduling.queues import QUEUE_LABEL, QueueError, QueueState
from scheduling.queues.view import QueueView
from scheduling.quota_owner import by_kueue
from scheduling.resources import ZERO, plus, total
from scheduling.topology import TopologyCache


@dataclass(frozen=True, slots=True)
class PassFacts:
    """What one pass reads: the facts, and the working copy its releases are placed on."""

    snapshot: ClusterSnapshot
    view: QueueView
    work: Statement
    nodes: tuple[str, ...]
    candidates: Candidates  # by queue: the running pods preemption may consider, read when asked
    topologies: TopologyCache
    now: float
    settings: GateSettings
    capacity: Capacity
    kueue: frozenset[str] = frozenset()  # the gangs whose quota Kueue owns (``scheduling.quota_owner``)
    allowed: dict[tuple[object, ...], list[str]] = field(default_factory=dict)  # memo of ``_allowed``


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What a pass derives from the node objects alone, kept in ``Statement.node_memo`` across passes.

    Attributes:
        names: every node's name, sorted.
        capacity: the schedulable nodes' GPUs.
        allowed: memo of ``scheduling.admission.verdict._allowed``: the nodes a set of constraints
            allows, by the constraints and the starving group's nodes (mutable: filled as asked).
    """

    names: tuple[str, ...]
    capacity: Capacity
    allowed: dict[tuple[object, ...], list[str]]

    @staticmethod
    def of(work: Statement) -> NodeFacts:
        """The facts of ``work``'s nodes: carried from an earlier pass, or read now (every node)."""
        found = work.node_memo.get(NodeFacts)
        if isinstance(found, NodeFacts):
            return found
        nodes = work.snapshot.nodes
        made = NodeFacts(tuple(sorted(nodes)), Capacity.of(nodes.values()), {})
        work.node_memo[NodeFacts] = made
        return made


@dataclass
class Walk:
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
    replanned: list[PodPlan] = field(default_factory=list)  # in-flight pods planned again (plan_on_pod)

    @property
    def kept_gpus(self) -> int:
        """The free GPUs the starving group keeps from the room count."""
        return self.reservation.gpus if self.reservation is not None else 0

    def take(
        self, state: QueueState | None, need: Resources, pods: int, *, preemptible: bool, room: bool
    ) -> None:
        """Count a group released: its pods in flight, its needs on its queues (``room``: out of the room).

        ``state`` is ``None`` for a group whose quota Kueue owns: it charges no queue of phalanx's.
        """
        if room:
            self.room -= need.gpus
        self.unbound_gpus += need.gpus
        self.unbound_pods += pods
        self.ahead += 1
        for queue in state.path() if state is not None else ():
            self.extra[queue.name] = plus(self.extra.get(queue.name, ZERO), need)
            if not preemptible:
                self.extra_np[queue.name] = plus(self.extra_np.get(queue.name, ZERO), need)


def count_in_flight(key: str, pods: Sequence[Pod], walk: Walk, ctx: PassFacts) -> None:
    """Count a released, unbound group: its GPUs out of the room, its pods on the nodes if they fit."""
    need = total(p.requests for p in pods)
    walk.room -= need.gpus
    walk.flight_gpus += need.gpus
    walk.unbound_gpus += need.gpus
    walk.unbound_pods += len(pods)
    walk.ahead += 1
    work, tree = ctx.work, ctx.view.tree
    if ctx.settings.plan_on_pod:
        hold_plans(key, pods, walk, ctx)
    else:
        plan_gang(key, pods, ctx.nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work)
    if by_kueue(pods[0], ctx.kueue):  # in flight, it takes room, but it charges no queue of phalanx's
        return
    try:
        queue = tree.workload_queue(pods[0].labels.get(QUEUE_LABEL))
    except QueueError:
        return
    for name in tree.path(queue):
        walk.extra[name] = plus(walk.extra.get(name, ZERO), need)


def hold_plans(key: str, pods: Sequence[Pod], walk: Walk, ctx: PassFacts) -> None:
    """Keep each in-flight pod's plan on the working copy; plan again those whose plan no longer holds.

    A plan holds while its node still has room for the pod and every planned GPU index is free there
    (nothing bound there since took one). A pod whose plan does not hold, or that has none (released
    before plans were carried), is planned again with the rest of its group's such pods, and the new
    plan is written on it (``Walk.replanned``); the sidecar's plugin then tries it again. One that finds
    no place keeps its plan, and kube-scheduler keeps saying why it cannot bind.
    """
    work = ctx.work
    lost: list[Pod] = []
    for pod in pods:
        plan = pod.plan
        room = work.room(plan[0]) if plan is not None else None
        if (
            plan is None
            or room is None
            or not room.fits(pod)
            or len(plan[1]) != pod.requests.gpus
            or not room.free.issuperset(plan[1])
        ):
            lost.append(pod)
            continue
        work.assign(pod, plan[0], plan[1], "planned")
    if not lost:
        return
    again = plan_gang(key, lost, ctx.nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work)
    if isinstance(again, GangPlan):
        members = again.members
        walk.replanned.extend(sorted(PodPlan(members[a.uid].key, a.node, a.gpus) for a in again.assignments))


def idle_by_rule(walk: Walk, kept: Sequence[Kept]) -> dict[str, int]:
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


def with_extra(
    state: QueueState, extra: Mapping[str, Resources], extra_np: Mapping[str, Resources]
) -> QueueState:
    """``state`` with what this pass released (and groups in flight) added along its path."""
    if not any(queue.name in extra for queue in state.path()):
        return state  # nothing added on its path: the view's own state (most groups of a pass)
    parent = None if state.parent is None else with_extra(state.parent, extra, extra_np)
    return replace(
        state,
        allocated=plus(state.allocated, extra.get(state.name, ZERO)),
        allocated_non_preemptible=plus(state.allocated_non_preemptible, extra_np.get(state.name, ZERO)),
        parent=parent,
    )


def gpus_of(pods: Sequence[Pod]) -> int:
    """The GPUs ``pods`` request together."""
    return sum(p.requests.gpus for p in pods)


def keys_of(pods: Sequence[Pod]) -> tuple[str, ...]:
    """The keys of ``pods``, sorted: how a released group names its pods."""
    return tuple(sorted(p.key for p in pods))
