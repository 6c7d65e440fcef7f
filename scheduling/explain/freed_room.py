"""The plan a waiting group would get once some running groups finish: who blocks it, and where it goes.

When capacity is what keeps a group waiting, a user wants to know what it waits for: which running
groups must finish, and where it would then go. The answer is the gang planner's own
(``scheduling.gang.gang_planner.plan_gang``) on a ``Statement`` from which those groups' pods were evicted, so
it is the plan the filter would make at that moment, with nodes and GPU indices.

Choice, deterministic: the fewest groups; among as few, the fewest GPUs freed; then by names. Running
groups are a PodGroup's bound pods, or a pod on its own (any scheduler's: its GPUs are as real). Sets of
one are all tried; sets of two and three only among the ``PAIR_POOL`` / ``TRIPLE_POOL`` smallest groups,
and no more than ``BUDGET`` plans in all, so an explanation stays a fraction of a second on a large
cluster; beyond that it says none was found rather than search on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.explain.explanation import PlacedPod, WhatIf
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS, GangPlan, plan_gang
from scheduling.model import Pod, group_key
from scheduling.topology import TopologyCache

MOST_GROUPS = 3
"""The largest set of running groups tried."""

PAIR_POOL = 64
"""Sets of two are drawn from this many of the smallest running groups."""

TRIPLE_POOL = 24
"""Sets of three are drawn from this many of the smallest running groups."""

BUDGET = 2000
"""At most this many plans are tried."""


def planned(plan: GangPlan) -> tuple[PlacedPod, ...]:
    """A gang plan as (pod name, node, GPU indices), by pod name."""
    return tuple(PlacedPod(plan.members[a.uid].name, a.node, a.gpus) for a in plan.assignments)


@dataclass(frozen=True, slots=True)
class Running:
    """A running group: its key, the GPUs its pods hold, and those pods."""

    key: str
    gpus: int
    pods: tuple[Pod, ...]


def running_groups(snapshot: ClusterSnapshot, nodes: Sequence[str], besides: str) -> list[Running]:
    """Every group holding GPUs on ``nodes``, but ``besides``: the fewest GPUs first, then by key."""
    allowed = frozenset(nodes)
    by_group: dict[str, list[Pod]] = {}
    for pod in snapshot.all_pods():
        if pod.holds_resources and pod.requests.gpus and pod.node_name in allowed:
            key = group_key(pod)
            if key != besides:
                by_group.setdefault(key, []).append(pod)
    found = [Running(key, sum(p.requests.gpus for p in pods), tuple(pods)) for key, pods in by_group.items()]
    return sorted(found, key=lambda g: (g.gpus, g.key))


def room_once_finished(
    key: str,
    waiting: Sequence[Pod],
    nodes: Sequence[str],
    snapshot: ClusterSnapshot,
    promises: PromiseBook,
    topologies: TopologyCache,
    *,
    free: int,
    locality_keys: Sequence[str] = DEFAULT_LOCALITY_KEYS,
) -> WhatIf | None:
    """The first set of running groups (see the module's order) whose finishing lets ``waiting`` be planned.

    Args:
        key: the waiting group's key (its own running members are never "finished").
        waiting: the members the filter would plan together.
        nodes: the nodes they may go to (kube-scheduler's candidates, health included).
        snapshot: the cluster now.
        promises: GPUs promised to others.
        topologies: topology scoring cache.
        free: GPUs free on ``nodes`` now; a set freeing too few to cover the rest is not tried.
        locality_keys: node labels of locality domains, as the filter's settings have them.

    Returns:
        The groups, the GPUs they free and the plan then; ``None`` when no set within the bounds helps.
    """
    need = sum(p.requests.gpus for p in waiting)
    groups = running_groups(snapshot, nodes, key)
    tried = 0
    for size in range(1, MOST_GROUPS + 1):
        pool = groups if size == 1 else groups[: PAIR_POOL if size == 2 else TRIPLE_POOL]
        sets = [s for s in combinations(pool, size) if free + sum(g.gpus for g in s) >= need]
        sets.sort(key=lambda s: (sum(g.gpus for g in s), sorted(g.key for g in s)))
        for chosen in sets:
            if tried >= BUDGET:
                return None
            tried += 1
            work = Statement(snapshot, promises)
            for pod in (pod for g in chosen for pod in g.pods):
                work.evict(pod, "finished, in the what-if")
            plan = plan_gang(
                key,
                waiting,
                nodes,
                snapshot,
                promises,
                topologies,
                locality_keys=locality_keys,
                statement=work,
            )
            if isinstance(plan, GangPlan):
                return WhatIf(
                    tuple(sorted(g.key for g in chosen)), sum(g.gpus for g in chosen), planned(plan)
                )
    return None
