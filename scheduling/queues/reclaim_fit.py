"""Whether a waiting group fits on the real nodes once reclaim's victims are gone.

Reclaim (``scheduling.queues.choose_reclaims``) chooses victims by queue arithmetic; before it evicts
anything it asks this check, so it never evicts a gang that frees GPUs on the wrong nodes. The check
evicts the victims on a ``Statement`` over the snapshot and plans the waiting group there with the gang
planner: the same room accounting and the same placement rule as ``filter``.
"""

from __future__ import annotations

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import TERMINAL_PHASES, Pod
from scheduling.topology import TopologyCache


def group_pods(snapshot: ClusterSnapshot, key: str) -> list[Pod]:
    """The live pods of the group ``key``: a PodGroup's members, or the one pod of that key."""
    members = snapshot.members(key)
    if not members:
        namespace, _, name = key.partition("/")
        pod = snapshot.pod(namespace, name)
        members = [pod] if pod is not None and pod.group_key is None else []
    return [p for p in members if p.phase not in TERMINAL_PHASES]


def fits_after_evicting(
    key: str, victims: frozenset[str], snapshot: ClusterSnapshot, topologies: TopologyCache
) -> bool:
    """Whether group ``key``'s waiting pods can all be placed once the groups ``victims`` are evicted."""
    statement = Statement(snapshot)
    for victim in sorted(victims):
        for pod in group_pods(snapshot, victim):
            statement.evict(pod, f"reclaim for {key}")
    waiting = [p for p in group_pods(snapshot, key) if p.node_name is None and not p.terminating]
    plan = plan_gang(
        key, waiting, sorted(snapshot.nodes), snapshot, statement.promises, topologies, statement=statement
    )
    return isinstance(plan, GangPlan)
