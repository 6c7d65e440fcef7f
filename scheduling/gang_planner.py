"""Plan a whole gang at once: every member's node and GPU indices, or why the gang cannot run now.

This is the "reserve at filter" half of gang scheduling through an extender (architecture.md §3): when
the first member of a gang reaches ``filter``, the whole gang is planned against free capacity minus
every other promise, and the plan becomes a reservation the rest of the cluster respects. A gang that
does not fit gets one sentence saying what it needs and what is free, which kube-scheduler shows on
every member ("gang ml/llama: needs 32 GPUs (4 pods x 8); 20 free on 3 nodes").

Placement rule, deterministic (ties by name): members go largest first; each goes to a node the gang
already uses if it fits there (fewest nodes), else to the node that leaves the least room (best fit),
preferring the locality domain (rack, then zone) that can hold the whole gang, and the one the gang
already uses. GPU indices come from ``scheduling.gpu_choice.choose_gpus`` (topology-aware).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.gpu_choice import choose_gpus
from scheduling.gpu_usage import FreeGpus
from scheduling.model import Node, Pod
from scheduling.promises import PromiseBook
from scheduling.snapshot import ClusterSnapshot
from scheduling.topology import TopologyCache

DEFAULT_LOCALITY_KEYS = ("phalanx.io/rack", "topology.kubernetes.io/zone")
"""Node labels naming locality domains, innermost first; configurable per extender."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one member goes."""

    pod: Pod
    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class GangPlan:
    """Every member's place; ``nodes`` is the set of nodes used, for locality reporting."""

    group: str
    placements: tuple[Placement, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        """The distinct nodes the plan uses, sorted."""
        return tuple(sorted({p.node for p in self.placements}))


@dataclass(frozen=True, slots=True)
class GangShortfall:
    """Why the gang cannot be placed now, in one sentence a user reads on every member."""

    group: str
    message: str


@dataclass(slots=True)
class _Room:
    node: Node
    free: set[int]
    free_count: int
    cpu: int | None
    memory: int | None

    def fits(self, pod: Pod) -> bool:
        need = pod.requests
        if need.gpus and (self.node.topology_problem is not None or self.free_count < need.gpus):
            return False
        if self.cpu is not None and need.milli_cpu > self.cpu:
            return False
        return self.memory is None or need.memory <= self.memory

    def take(self, pod: Pod, gpus: tuple[int, ...]) -> None:
        self.free -= set(gpus)
        self.free_count -= len(gpus)
        if self.cpu is not None:
            self.cpu -= pod.requests.milli_cpu
        if self.memory is not None:
            self.memory -= pod.requests.memory


def _rooms(candidates: Sequence[str], snapshot: ClusterSnapshot, promises: PromiseBook) -> dict[str, _Room]:
    rooms: dict[str, _Room] = {}
    for name in sorted(set(candidates)):
        node = snapshot.nodes.get(name)
        free = snapshot.free_on(name, promises)
        if node is None or free is None or node.unschedulable or not node.ready:
            continue
        used = snapshot.usage_of(name).requested
        promised = promises.requested_on(name)
        alloc = node.allocatable
        cpu = alloc.milli_cpu - used.milli_cpu - promised.milli_cpu if alloc.milli_cpu else None
        memory = alloc.memory - used.memory - promised.memory if alloc.memory else None
        rooms[name] = _Room(node, set(free.indices), free.count, cpu, memory)
    return rooms


def _domain(node: Node, keys: Sequence[str]) -> tuple[str, ...]:
    return tuple(node.labels.get(key, "") for key in keys)


def _preferred_domain(
    rooms: Mapping[str, _Room], total_gpus: int, keys: Sequence[str]
) -> tuple[str, str] | None:
    """(label, value) of the innermost locality domain with free GPUs for the whole gang, tightest first."""
    for key in keys:
        free: dict[str, int] = {}
        for room in rooms.values():
            value = room.node.labels.get(key)
            if value:
                free[value] = free.get(value, 0) + room.free_count
        fitting = sorted((count, value) for value, count in free.items() if count >= total_gpus)
        if fitting:
            return key, fitting[0][1]
    return None


def plan_gang(
    group: str,
    members: Sequence[Pod],
    candidates: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    cache: TopologyCache,
    *,
    locality_keys: Sequence[str] = DEFAULT_LOCALITY_KEYS,
) -> GangPlan | GangShortfall:
    """Place every pod of ``members`` on ``candidates``, all or nothing.

    Args:
        group: the gang's ``namespace/name``, for messages.
        members: the members to place now (unbound ones); all must fit or none is placed.
        candidates: the nodes kube-scheduler found feasible for the member being filtered.
        snapshot: the cluster view.
        promises: capacity promised to others (their reservations and binds in flight).
        cache: topology scoring cache.
        locality_keys: node labels of locality domains, innermost first.
    """
    rooms = _rooms(candidates, snapshot, promises)
    ordered = sorted(members, key=lambda p: (-p.requests.gpus, -p.requests.milli_cpu, p.name))
    total = sum(p.requests.gpus for p in ordered)
    domain = _preferred_domain(rooms, total, locality_keys) if total else None
    used: list[str] = []
    placements: list[Placement] = []
    for pod in ordered:
        choice = _choose_node(pod, rooms, used, domain, locality_keys)
        if choice is None:
            before = _rooms(candidates, snapshot, promises)  # what was free, not what the partial plan left
            return GangShortfall(group, _shortfall_message(group, ordered, list(before.values())))
        room = rooms[choice]
        free = FreeGpus(frozenset(room.free), room.free_count)
        gpus = choose_gpus(room.node, free, pod.requests.gpus, cache)
        room.take(pod, gpus)
        placements.append(Placement(pod, choice, gpus))
        if choice not in used:
            used.append(choice)
    return GangPlan(group, tuple(sorted(placements, key=lambda p: p.pod.name)))


def _choose_node(
    pod: Pod,
    rooms: Mapping[str, _Room],
    used: Sequence[str],
    domain: tuple[str, str] | None,
    keys: Sequence[str],
) -> str | None:
    fitting = [name for name, room in rooms.items() if room.fits(pod)]
    if not fitting:
        return None
    used_domains = {_domain(rooms[n].node, keys) for n in used}

    def rank(name: str) -> tuple[int, int, int, int, str]:
        room = rooms[name]
        in_domain = domain is None or room.node.labels.get(domain[0]) == domain[1]
        return (
            0 if name in used else 1,
            0 if in_domain else 1,
            0 if _domain(room.node, keys) in used_domains else 1,
            room.free_count - pod.requests.gpus,
            name,
        )

    return min(fitting, key=rank)


def _shortfall_message(group: str, members: Sequence[Pod], rooms_list: Sequence[_Room]) -> str:
    """'gang ns/g: needs 32 GPUs for 4 pods (8 per pod); 20 free on 3 nodes, ...', or for CPU/memory."""
    gpus = sorted((p.requests.gpus for p in members if p.requests.gpus), reverse=True)
    pods = f"{len(members)} pod{'s' if len(members) != 1 else ''}"
    if gpus:
        sizes = f"{gpus[0]} per pod" if len(set(gpus)) == 1 else " + ".join(map(str, gpus))
        free = sum(r.free_count for r in rooms_list)
        with_free = len([r for r in rooms_list if r.free_count > 0])
        largest = max((r.free_count for r in rooms_list), default=0)
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
