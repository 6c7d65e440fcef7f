"""The release pass's walk: what it reads once, and what the groups released so far have used.

``scheduling.admission.release`` walks the pending groups in their fair order; each group's verdict
(``scheduling.admission.verdict``) reads the pass's facts (``PassFacts``) and takes room, in-flight
budget and queue allocation from the walk (``Walk``) when it is released. At the end the GPUs still
free are attributed to the rules that kept groups waiting (``idle_by_rule``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from scheduling.admission.flight import InFlight
from scheduling.admission.outcome import (
    GateSettings,
    Kept,
    KeptRule,
    PodPlan,
)
from scheduling.admission.preemption_room import Candidates
from scheduling.admission.reserve import Capacity, Reservation
from scheduling.cluster.ledger import FlightTotals
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import plan_gang
from scheduling.model import Pod, Resources
from scheduling.queues import QueueError, QueueState
from scheduling.queues.view import QueueView
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


def count_in_flight(flight: InFlight, dropped: frozenset[str], walk: Walk, ctx: PassFacts) -> None:
    """Count the released, unbound groups: their GPUs out of the room, their needs on their queues.

    The ledger keeps the sums of every released group, per queue label (``scheduling.cluster.ledger``);
    the groups that do not count whole (``dropped``: lapsed, or turned down as misplaced; partly
    promised; Kueue's, which charge no queue of phalanx's) are taken out of them, and each label's sum is
    charged along its queue's path once, so a decision costs O(those groups), not O(groups in flight).
    Without plans carried on pods, each counting group is also put on the nodes where it fits, in key
    order; with them, ``hold_plans`` holds every pod at its plan once the groups are counted.
    """
    waiting = flight.waiting
    flights = waiting.released
    totals = FlightTotals.of(waiting)
    for key in sorted(dropped):
        totals.charge(flights[key], -1)
    for key, part in sorted(flight.partial.items()):
        if key not in dropped:
            totals.charge(flights[key], -1)
            totals.charge(part, 1)
    for key in sorted(ctx.kueue & flights.keys()):
        counted = None if key in dropped else flight.counting(key)
        if counted is not None and not counted.stamped and counted.pods[0].group_key == key:
            totals.charge_queue(counted, -1)  # in flight, it takes room, but it charges no queue of phalanx's
    if not ctx.settings.plan_on_pod:
        work = ctx.work
        for key in sorted(flights):
            counted = None if key in dropped else flight.counting(key)
            if counted is not None:
                plan_gang(
                    key, counted.pods, ctx.nodes, ctx.snapshot, work.promises, ctx.topologies, statement=work
                )
    walk.room -= totals.gpus
    walk.flight_gpus += totals.gpus
    walk.unbound_gpus += totals.gpus
    walk.unbound_pods += totals.members
    walk.ahead += totals.groups
    tree = ctx.view.tree
    for label, (cpu, memory, gpus, _) in sorted(totals.by_label().items(), key=lambda item: item[0] or ""):
        try:
            queue = tree.workload_queue(label)
        except QueueError:
            continue
        need = Resources(cpu, memory, gpus)
        for name in tree.path(queue):
            walk.extra[name] = plus(walk.extra.get(name, ZERO), need)


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
