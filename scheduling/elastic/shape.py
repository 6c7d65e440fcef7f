"""Room by shape: where each waiting gang will go, so elastic jobs shrink and pack around it.

Giving back a count of GPUs is not enough: three elastic workers packed on one node of three leave
2 + 8 + 8 GPUs free, and a gang of 3 x 6 GPUs still waits. So the round asks the gang planner
(``scheduling.gang.gang_planner.plan_gang``, the extender's own placement rule) where each waiting gang
would go once the elastic jobs are at this round's sizes, and the layout keeps those GPUs free:

1. on a working copy where each elastic job has given back the workers above its size (the highest
   replica indices, as its operator removes them), each waiting gang is planned in queue order; a
   planned gang's GPUs stay taken on the copy, so the next one plans around it;
2. a gang that does not fit around the workers the elastic jobs keep is planned again with every
   elastic worker gone (the workers in its way are then moved, not the gang kept waiting);
3. a gang that does not fit even so reserves nothing here (the pool still counts its GPUs).

Single pods (no PodGroup) reserve nothing by shape: any node with room takes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.elastic.job import ElasticJob
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Pod
from scheduling.topology import TopologyCache

_NO_PROMISES = PromiseBook()


def reserved_room(
    snapshot: ClusterSnapshot,
    jobs: Sequence[ElasticJob],
    sizes: Mapping[str, int],
    waiting: Sequence[str],
    topologies: TopologyCache,
) -> dict[str, int]:
    """GPUs per node the waiting gangs ``waiting`` (group keys, in their turn) will take.

    Args:
        snapshot: the cluster now.
        jobs: the elastic jobs.
        sizes: each elastic job's size this round.
        waiting: the waiting groups that are not elastic jobs, in the order they get their turn.
        topologies: prepared GPU topologies (the planner chooses GPU indices).
    """
    gangs = [(key, members) for key in waiting if (members := _unbound(snapshot, key))]
    if not gangs:
        return {}
    names = sorted(name for name, node in snapshot.nodes.items() if node.takes_pods)
    kept = Statement(snapshot)
    bare = Statement(snapshot)
    for job in jobs:
        for index, pod in enumerate(job.workers):
            if pod.holds_resources and pod.node_name is not None and pod.node_name in snapshot.nodes:
                bare.evict(pod, "elastic worker, for room")
                if index >= sizes.get(job.key, job.size):
                    kept.evict(pod, "elastic worker given back")
    reserved: dict[str, int] = {}
    for key, members in gangs:
        plan = plan_gang(key, members, names, snapshot, _NO_PROMISES, topologies, statement=kept)
        if isinstance(plan, GangPlan):
            _take(plan, bare, reserved)
            continue
        plan = plan_gang(key, members, names, snapshot, _NO_PROMISES, topologies, statement=bare)
        if isinstance(plan, GangPlan):
            _take(plan, kept, reserved)
    return dict(sorted(reserved.items()))


def _unbound(snapshot: ClusterSnapshot, key: str) -> list[Pod]:
    return [p for p in snapshot.members(key) if p.node_name is None and not p.terminating]


def _take(plan: GangPlan, other: Statement, reserved: dict[str, int]) -> None:
    """Count the plan's GPUs as reserved, and take as many on ``other`` too where it has them free.

    The plan chose its GPU indices on the other copy, so on ``other`` those very GPUs may be held by a
    worker the copy keeps while as many others are free (the gang planned with every elastic worker
    gone, on GPUs a kept worker holds): then the same count of free ones is taken, lowest first, so
    that the next gang plans around the room this one will have. Only the count matters here; where
    the gang really goes is its own planner's choice once the workers in its way have moved.
    """
    for assignment in plan.assignments:
        pod = plan.members[assignment.uid]
        reserved[assignment.node] = reserved.get(assignment.node, 0) + pod.requests.gpus
        room = other.room(assignment.node)
        if room is None or not room.fits(pod):
            continue
        gpus = assignment.gpus
        if room.taking(pod, gpus) is None:
            gpus = tuple(sorted(room.free))[: len(gpus)]
        if room.taking(pod, gpus) is not None:
            other.assign(pod, assignment.node, gpus, "waiting gang, for room")
