"""One reclaim pass as a plan: the whole gangs to evict so that starved queues get their fair share back.

The placement manager's queue pass and the simulator ask this one function with the same snapshot and
queue view, so reclaim is simulated by the rule the product runs. It chooses with
``scheduling.queues.choose_reclaims`` (queue arithmetic, the fewest gangs that make room), checks each
victim set on the real nodes with the gang planner (``scheduling.queues.reclaim_fit``) before anything is
chosen, so it never evicts a gang that frees GPUs on the wrong nodes, and commits the evictions of the
victims' bound pods on a ``Statement``: one ``Plan`` of ``Eviction`` actions, the shape every planner
hands its drivers (``scheduling.plan``).
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass, field

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.plan import Plan
from scheduling.queues import PendingGroup, ReclaimChoice, ReclaimOutcome, Victim, choose_reclaims
from scheduling.queues.reclaim_fit import fits_after_evicting, group_pods
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache


@dataclass(frozen=True, slots=True)
class Reclaim:
    """What one reclaim pass decided.

    Attributes:
        choices: per pending group, in the view's fair order, what reclaim chose for it and why.
        plan: what the choices add up to: every bound pod of every gang chosen, in the order chosen,
            evicted with its gang (``Eviction.group``) and the sentence for its event.
    """

    choices: tuple[ReclaimChoice, ...] = ()
    plan: Plan = field(default_factory=Plan)

    @property
    def evicting(self) -> tuple[ReclaimChoice, ...]:
        """The choices that evict, in order."""
        return tuple(c for c in self.choices if c.outcome is ReclaimOutcome.EVICT)

    @property
    def victims(self) -> tuple[Victim, ...]:
        """The gangs chosen, in order."""
        return tuple(v for c in self.evicting for v in c.victims)


def plan_reclaim(
    snapshot: ClusterSnapshot,
    view: QueueView,
    topologies: TopologyCache,
    *,
    now: float,
    shrinking: Set[str] = frozenset(),
) -> Reclaim:
    """Reclaim for the pending groups of ``view``, in its fair order, as one plan.

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

    choices = choose_reclaims(
        view.pending,
        tree=view.tree,
        shares=view.shares,
        allocated=allocated,
        running=tuple(g for g in view.running if g.key not in shrinking),
        free=view.free,
        now=now,
        fits=fits,
    )
    reclaim = Reclaim(choices)
    statement = Statement(snapshot)
    for victim in reclaim.victims:
        for pod in group_pods(snapshot, victim.gang):
            if pod.node_name is not None:
                statement.evict(pod, f"evicted whole with {victim.gang}: {victim.reason}", group=victim.gang)
    return Reclaim(choices, statement.commit())
