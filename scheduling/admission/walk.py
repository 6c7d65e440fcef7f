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
from scheduling.resources import ZERO, plus
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
    refused: Mapping[str, frozenset[str]] = field(default_factory=dict)  # ``ReleasedBook.refused``


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
    refused: dict[str, frozenset[str]] = field(default_factory=dict)  # nodes newly refused, by pod key

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


def count_in_flight(groups: Mapping[str, Sequence[Pod]], walk: Walk, ctx: PassFacts) -> None:
    """Count the released, unbound groups: their GPUs out of the room, their needs on their queues.

    Without plans carried on pods, each group is also put on the nodes where it fits, in key order;
    with them, ``hold_plans`` holds every pod at its plan once the groups are counted. The needs are
    summed per queue label first and charged along each queue's path once: a decision counts every
    group in flight, and most share a few queues.
    """
    work = ctx.work
    by_label: dict[str | None, list[int]] = {}
    flight = members = 0
    for key, pods in groups.items():
        cpu = memory = gpus = 0
        for pod in pods:
            need = pod.requests
            cpu, memory, gpus = cpu + need.milli_cpu, memory + need.memory, gpus + need.gpus
        flight += gpus
        members += len(pods)
        if not ctx.settings.plan_on_pod:
            plan_gang(key, pods, ctx.nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work)
        if by_kueue(pods[0], ctx.kueue):  # in flight, it takes room, but it charges no queue of phalanx's
            continue
        summed = by_label.setdefault(pods[0].labels.get(QUEUE_LABEL), [0, 0, 0])
        summed[0], summed[1], summed[2] = summed[0] + cpu, summed[1] + memory, summed[2] + gpus
    walk.room -= flight
    walk.flight_gpus += flight
    walk.unbound_gpus += flight
    walk.unbound_pods += members
    walk.ahead += len(groups)
    tree = ctx.view.tree
    for label, (cpu, memory, gpus) in sorted(by_label.items(), key=lambda item: item[0] or ""):
        try:
            queue = tree.workload_queue(label)
        except QueueError:
            continue
        need = Resources(cpu, memory, gpus)
        for name in tree.path(queue):
            walk.extra[name] = plus(walk.extra.get(name, ZERO), need)


def hold_plans(groups: Mapping[str, Sequence[Pod]], walk: Walk, ctx: PassFacts) -> None:
    """Keep each in-flight pod's plan on the working copy; plan again those whose plan no longer holds.

    A plan holds while its node still has room for the pod and every planned GPU index is free there
    (nothing bound there since took one), and kube-scheduler has not refused it (``refused_now``).
    Every plan that may hold is held first, on the rooms ``HeldPlans`` keeps per node between
    decisions (``scheduling.cluster.held``), so a decision works again only on the nodes that changed.
    Then, group by group, a pod whose plan does not hold, or that has none (released before plans were
    carried), is planned again with the rest of its group's such pods, away from every node it was
    refused on, and the new plan is written on it (``Walk.replanned``); the sidecar's plugin then tries
    it again. One that finds no place keeps its plan, and kube-scheduler keeps saying why it cannot
    bind. When every node has refused it, its refusals are forgotten and it is planned as if new.
    """
    work = ctx.work
    planned: dict[str, list[Pod]] = {}
    troubled: set[str] = set()  # groups with a pod that has no plan or a refused one
    for key, pods in groups.items():
        for pod in pods:
            plan = pod.plan
            if plan is None:
                troubled.add(key)
                continue
            refused = ctx.refused.get(pod.key)
            if refused_now(pod, ctx.now, ctx.settings.plan_refused_after):
                refused = walk.refused[pod.key] = (refused or frozenset()) | {plan[0]}
            if refused is not None and plan[0] in refused:
                troubled.add(key)
            else:
                planned.setdefault(plan[0], []).append(pod)
    for pods in planned.values():
        pods.sort(key=_by_key)
    broken = work.held.hold(work, planned)
    if broken:
        troubled.update(key for key, pods in groups.items() if any(p.key in broken for p in pods))
    for key in sorted(troubled):
        _plan_again(key, groups[key], broken, walk, ctx)


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


def _by_key(pod: Pod) -> str:
    return pod.key


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
