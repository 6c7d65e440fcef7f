"""Which worker cluster a gang goes to: the one that can place it whole now, as phalanx would place it.

MultiKueue (Kueue's multi-cluster dispatch) copies a job to worker clusters and keeps it on the first
whose Kueue reserves quota for it. Quota is a count: a worker whose ClusterQueue has 8 GPUs left may have
them as 4 + 4 on two nodes, where a worker of 8 GPUs cannot run, and the job then sits there while
another worker could run it now. phalanx knows each worker's GPUs index by index, so it can say where a
gang fits whole: this module decides that, on each worker's snapshot, with the same gang planner that
places it there (``scheduling.gang.gang_planner.plan_gang``: fewest nodes, one locality domain when possible,
the best-connected GPU sets).

The decision: every worker is tried; those where the gang fits now rank first, then by fewest nodes
used, then by the GPUs left free on the nodes it uses (less is better: the plan packs rather than
fragments), then by name. The best is nominated alone; when none can hold it now, none is nominated and
the job waits on the manager, where every pass tries again, so it goes to the first worker that can take
it whole rather than to one that would hold it half-placed behind its own queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.cluster.statement import Statement
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import Pod
from scheduling.topology import TopologyCache


@dataclass(frozen=True, slots=True)
class WorkerFit:
    """How one worker would take the gang.

    Attributes:
        worker: the worker cluster's name (its MultiKueueCluster).
        fits: the gang fits there whole now.
        nodes: the nodes the plan uses (0 when it does not fit).
        left: the GPUs the plan leaves free on those nodes (a tie-break: fuller nodes first).
        reason: one sentence for the job's event: where it would go, or why it does not fit.
    """

    worker: str
    fits: bool
    nodes: int
    left: int
    reason: str

    @property
    def rank(self) -> tuple[bool, int, int, str]:
        """Sort key: fitting workers first, then fewest nodes, fewest GPUs left free, then name."""
        return (not self.fits, self.nodes, self.left, self.worker)


@dataclass(frozen=True, slots=True)
class Dispatch:
    """The decision for one gang.

    Attributes:
        nominated: the worker to send it to, or ``None`` when none can place it whole now.
        fits: every worker's answer, best first.
    """

    nominated: str | None
    fits: tuple[WorkerFit, ...]

    @property
    def message(self) -> str:
        """The decision in one sentence, naming every worker's answer."""
        answers = "; ".join(f"{f.worker}: {f.reason}" for f in self.fits) or "no worker cluster is known"
        if self.nominated is None:
            return f"no worker cluster can place it whole now, it waits on the manager ({answers})"
        return f"sent to worker cluster {self.nominated}, the best place for it now ({answers})"


def dispatch(
    group: str, pods: Sequence[Pod], workers: Mapping[str, Statement], topologies: TopologyCache
) -> Dispatch:
    """Rank ``workers`` for the gang ``group`` of ``pods`` and nominate the best that fits whole now.

    Each worker is a working copy of its cluster (``Statement``): the nominated worker keeps the gang's
    plan on it, so that the next gang decided in the same pass sees those GPUs taken; every other
    worker's copy is left as it was.

    Args:
        group: the gang's ``namespace/name``, for messages.
        pods: every member, unbound (from the job's pod sets and counts).
        workers: each reachable worker's working copy, by name.
        topologies: prepared GPU topologies (shared across workers: equal documents, one graph).
    """
    fits = sorted((_fit(group, pods, name, work, topologies) for name, work in workers.items()), key=_rank)
    best = fits[0] if fits and fits[0].fits else None
    if best is None:
        return Dispatch(None, tuple(fits))
    work = workers[best.worker]
    plan_gang(group, pods, _nodes(work), work.snapshot, work.promises, topologies, statement=work)
    return Dispatch(best.worker, tuple(fits))


def _rank(fit: WorkerFit) -> tuple[bool, int, int, str]:
    return fit.rank


def _nodes(work: Statement) -> list[str]:
    return sorted(n for n, node in work.snapshot.nodes.items() if node.takes_pods)


def _fit(group: str, pods: Sequence[Pod], name: str, work: Statement, topologies: TopologyCache) -> WorkerFit:
    """Try the gang on one worker's copy and leave the copy as it was."""
    mark = work.checkpoint()
    plan = plan_gang(group, pods, _nodes(work), work.snapshot, work.promises, topologies, statement=work)
    if not isinstance(plan, GangPlan):
        return WorkerFit(name, False, 0, 0, plan.message)
    used = plan.nodes
    left = sum(room.count for node in used if (room := work.room(node)) is not None)
    work.rollback(mark)
    where = ", ".join(used)
    return WorkerFit(name, True, len(used), left, f"fits whole on {len(used)} node(s) ({where})")
