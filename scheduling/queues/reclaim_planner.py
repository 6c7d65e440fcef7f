"""One reclaim pass: which whole gangs to evict so that starved queues get their fair share back.

The placement manager's queue pass and the simulator ask this one function with the same snapshot and
queue view, so reclaim is simulated by the rule the product runs. It plans with
``scheduling.queues.plan_reclaims`` (queue arithmetic, the fewest gangs that make room) and checks each
victim set on the real nodes with the gang planner (``scheduling.queues.reclaim_fit``) before anything is
chosen, so it never evicts a gang that frees GPUs on the wrong nodes.
"""

from __future__ import annotations

from collections.abc import Set

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.queues import PendingGroup, ReclaimPlan, plan_reclaims
from scheduling.queues.reclaim_fit import fits_after_evicting
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache


def reclaim_plans(
    snapshot: ClusterSnapshot,
    view: QueueView,
    topologies: TopologyCache,
    *,
    now: float,
    shrinking: Set[str] = frozenset(),
) -> tuple[ReclaimPlan, ...]:
    """Reclaim plans for the pending groups of ``view``, in its fair order.

    Args:
        snapshot: the cluster the view was built from.
        view: the queue view (fair shares, allocations, pending groups, running gangs).
        topologies: the cache the gang planner scores GPU sets with.
        now: the caller's clock, in the seconds of ``Pod.started_at`` (minimum runtimes).
        shrinking: groups that give room back by shrinking rather than eviction (elastic jobs above
            their minimum); they are never victims, so their surplus goes first.
    """
    allocated = {leaf: view.states[leaf].allocated for leaf in view.tree.leaves()}

    def fits(group: PendingGroup, victims: frozenset[str]) -> bool:
        return fits_after_evicting(group.key, victims, snapshot, topologies)

    return plan_reclaims(
        view.pending,
        tree=view.tree,
        shares=view.shares,
        allocated=allocated,
        running=tuple(g for g in view.running if g.key not in shrinking),
        free=view.free,
        now=now,
        fits=fits,
    )
