"""Plan a whole gang at once: every member's node and GPU indices, or why the gang cannot run now.

This is the "reserve at filter" half of gang scheduling through an extender (docs/design/gang-scheduling.md
§1): when the first member of a gang reaches ``filter``, the whole gang is planned against free capacity minus
every other promise, and the plan becomes a reservation the rest of the cluster respects. A gang that
does not fit gets one sentence saying what it needs and what is free, which kube-scheduler shows on
every member ("gang ml/llama: needs 32 GPUs (4 pods x 8); 20 free on 3 nodes").

Placement rule, deterministic (ties by name): members go largest first; each goes to a node the gang
already uses if it fits there (fewest nodes), else to the node that leaves the least room (best fit),
preferring the locality domain (rack, then zone) that can hold the whole gang, and the one the gang
already uses. GPU indices come from ``scheduling.gpu.choice.choose_gpus`` (topology-aware).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.cluster.usage import FreeGpus
from scheduling.gang.domain_room import domain_room
from scheduling.gang.fresh_order import domain_of, fresh_order
from scheduling.gpu.choice import choose_gpus
from scheduling.model import Pod
from scheduling.plan import Assignment, Plan
from scheduling.topology import TopologyCache

DEFAULT_LOCALITY_KEYS = ("phalanx.io/rack", "topology.kubernetes.io/zone")
"""Node labels naming locality domains, innermost first; configurable per extender."""


@dataclass(frozen=True, slots=True)
class GangPlan:
    """Every member's place: the ``Assignment`` actions the planner kept, one per member, by pod name.

    Attributes:
        group: the gang's key.
        plan: the assignments, as every planner hands out its actions (``scheduling.plan``).
        members: the members placed, by UID: what each assignment puts where (its requests); left out
            of equality, which the assignments decide.
    """

    group: str
    plan: Plan
    members: Mapping[str, Pod] = field(compare=False)

    @property
    def assignments(self) -> tuple[Assignment, ...]:
        """The members' assignments, by pod name."""
        return self.plan.assignments

    @property
    def nodes(self) -> tuple[str, ...]:
        """The distinct nodes the plan uses, sorted."""
        return tuple(sorted({a.node for a in self.plan.assignments}))


@dataclass(frozen=True, slots=True)
class GangShortfall:
    """Why the gang cannot be placed now, in one sentence a user reads on every member."""

    group: str
    message: str


def plan_gang(
    group: str,
    members: Sequence[Pod],
    candidates: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    cache: TopologyCache,
    *,
    locality_keys: Sequence[str] = DEFAULT_LOCALITY_KEYS,
    statement: Statement | None = None,
) -> GangPlan | GangShortfall:
    """Place every pod of ``members`` on ``candidates``, all or nothing.

    The plan is tried on ``statement`` (a working copy of ``snapshot`` after ``promises``; a new one if
    ``None``): a plan that fits leaves its assignments there, one that does not leaves it unchanged.

    Args:
        group: the gang's ``namespace/name``, for messages.
        members: the members to place now (unbound ones); all must fit or none is placed.
        candidates: the nodes kube-scheduler found feasible for the member being filtered; a member
            pinned to nodes (``Pod.pinned``, the placement manager's tolerations) goes only there.
        snapshot: the cluster view.
        promises: capacity promised to others (their reservations and binds in flight).
        cache: topology scoring cache.
        locality_keys: node labels of locality domains, innermost first.
        statement: the working copy to plan on (e.g. with a reclaim's victims already evicted).
    """
    work = statement if statement is not None else Statement(snapshot, promises)
    start = work.checkpoint()
    offered = frozenset(candidates)
    pinned = frozenset().union(*(p.pinned for p in members))
    ordered = sorted(members, key=lambda p: (-p.requests.gpus, -p.requests.milli_cpu, p.name))
    total = sum(p.requests.gpus for p in ordered)
    domain = domain_room(work, offered | pinned, locality_keys).preferred(total) if total else None
    used: list[str] = []
    for pod in ordered:
        choice = _choose_node(pod, work, pod.pinned or offered, used, domain, locality_keys)
        if choice is None:
            work.rollback(start)  # the message tells what was free, not what the partial plan left
            return GangShortfall(group, _shortfall(group, ordered, pod, work.rooms(offered | pinned)))
        room = work.room(choice)
        assert room is not None  # chosen because it has room
        gpus = choose_gpus(room.node, FreeGpus(room.free, room.count), pod.requests.gpus, cache)
        work.assign(pod, choice, gpus, f"gang {group}")
        if choice not in used:
            used.append(choice)
    placed = sorted(work.plan_since(start).assignments, key=lambda a: a.pod)  # one namespace: by name
    return GangPlan(group, Plan(tuple(placed)), {p.uid: p for p in ordered})


def _choose_node(
    pod: Pod,
    work: Statement,
    allowed: frozenset[str],
    used: Sequence[str],
    domain: tuple[str, str] | None,
    keys: Sequence[str],
) -> str | None:
    """The node for ``pod``: a used one that fits, best fit first; else the best node not used yet.

    Nodes not used yet come from an order kept on ``work`` for the member's GPU count
    (``scheduling.gang.fresh_order``): built once per statement, then brought up to date with the few
    nodes each plan changes, instead of every node re-ranked for every gang (most of a release pass at
    1,000 nodes).
    """
    rooms = {name: room for name in used if name in allowed and (room := work.room(name)) is not None}
    fitting = [name for name, room in rooms.items() if room.fits(pod)]
    if fitting:

        def rank(name: str) -> tuple[int, int, str]:
            room = rooms[name]
            in_domain = domain is None or room.node.labels.get(domain[0]) == domain[1]
            return (0 if in_domain else 1, room.count - pod.requests.gpus, name)

        return min(fitting, key=rank)
    order = fresh_order(work, pod, allowed, domain)
    used_domains = {domain_of(room.node, keys) for n in used if (room := work.room(n)) is not None}
    return order.best(pod, frozenset(used), used_domains, keys)


def _shortfall(group: str, members: Sequence[Pod], stuck: Pod, rooms: Mapping[str, NodeRoom]) -> str:
    """Why the gang does not fit; a member pinned to a node that cannot take it is named."""
    if stuck.pinned:
        where = ", ".join(sorted(stuck.pinned))
        return f"gang {group}: {stuck.name} is pinned to {where}, which has no room for it now"
    return _shortfall_message(group, members, list(rooms.values()))


def _shortfall_message(group: str, members: Sequence[Pod], rooms_list: Sequence[NodeRoom]) -> str:
    """'gang ns/g: needs 32 GPUs for 4 pods (8 per pod); 20 free on 3 nodes, ...', or for CPU/memory."""
    gpus = sorted((p.requests.gpus for p in members if p.requests.gpus), reverse=True)
    pods = f"{len(members)} pod{'s' if len(members) != 1 else ''}"
    if gpus:
        sizes = f"{gpus[0]} per pod" if len(set(gpus)) == 1 else " + ".join(map(str, gpus))
        free = sum(r.count for r in rooms_list)
        with_free = len([r for r in rooms_list if r.count > 0])
        largest = max((r.count for r in rooms_list), default=0)
        return (
            f"gang {group}: needs {sum(gpus)} GPUs for {pods} ({sizes}); "
            f"{free} free on {with_free} node{'s' if with_free != 1 else ''}, at most {largest} on one node"
        )
    return f"gang {group}: {pods} do not all fit on the candidate nodes (CPU or memory)"


def unplaced(members: Sequence[Pod]) -> list[Pod]:
    """The members still to place: live, unbound and not being deleted, by name."""
    return sorted((p for p in members if p.node_name is None and not p.terminating), key=lambda p: p.name)


def bound(members: Sequence[Pod]) -> list[Pod]:
    """The members already on a node and holding it."""
    return sorted((p for p in members if p.holds_resources), key=lambda p: p.name)
