"""The elastic decision of one round: one function that the placement manager and the simulator call.

Everything the elastic round decides comes out of ``decide_elastic`` as one value: the pool of GPUs
elastic jobs may hold and each queue's deficit (``pool``), every job's size and the moves that lay it
out on the fewest nodes (``planner``), which waiting workers to pin where and which pins an older plan
left stale (``pinning``), and which jobs may shrink instead of being evicted (``may_shrink``). Drivers
only read the facts into an ``ElasticRound`` and apply the decision, so the placement manager and the
simulator cannot compute any of it differently.

``may_shrink`` is a function of the jobs alone (their size against their minimum), not of the plan, so
a round can ask it before reclaim runs: a job above its minimum gives GPUs back by shrinking, and reclaim
must not evict it whole for them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic.elastic_planner import plan_elastic
from scheduling.elastic.job import ElasticJob, ElasticSettings
from scheduling.elastic.layout import Layout
from scheduling.elastic.pinning import choose_pins, stale_pins
from scheduling.elastic.pool import elastic_pool, queue_deficits
from scheduling.elastic.size_hold import SizeHold, live_holds, next_holds
from scheduling.elastic.throughput import Throughput
from scheduling.model import Pod
from scheduling.plan import Plan
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache

Pins = tuple[tuple[Pod, str], ...]
"""(worker, node) pairs, lowest replica index first."""


@dataclass(frozen=True, slots=True)
class ElasticRound:
    """The facts one elastic round decides from.

    Attributes:
        jobs: the elastic jobs (declarations checked; refused ones left out).
        snapshot: the cluster now.
        view: the queues now (``None``: no queues, every deficit 0).
        now: the time (seconds; the clock of ``last_moved``).
        last_moved: when each job last moved a worker.
        settings: the guards and the sizing rule.
        topologies: prepared GPU topologies, for the GPUs a move takes.
        models: each job's learned throughput (missing: the prior).
        attained: each job's attained service in GPU-seconds (missing: 0).
        holds: the holds the last round's decision carried on (``hold``).
    """

    jobs: Sequence[ElasticJob]
    snapshot: ClusterSnapshot
    view: QueueView | None
    now: float
    last_moved: Mapping[str, float]
    settings: ElasticSettings
    topologies: TopologyCache
    models: Mapping[str, Throughput] = field(default_factory=lambda: MappingProxyType({}))
    attained: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    holds: Mapping[str, SizeHold] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class ElasticDecision:
    """What one elastic round decided.

    Attributes:
        pool_gpus: the GPUs elastic jobs may hold in all.
        deficits: per queue, its fair share less what it holds.
        plan: the resizes and moves, each with its reason.
        layout: target workers per job and node.
        pins: per job, its waiting unpinned workers and the node each goes to.
        stale_pins: per job, its waiting workers pinned where the layout has no place for them, and
            where they would go instead (delete: the operator re-creates them, pinned anew).
        may_shrink: per job above its minimum, how many workers it may give back without being evicted.
        holds: per job resized for waiting work, the hold on its size; the driver hands it to the next
            round (``ElasticRound.holds``).
    """

    pool_gpus: int
    deficits: Mapping[str, int]
    plan: Plan
    layout: Layout
    pins: Mapping[str, Pins]
    stale_pins: Mapping[str, Pins]
    may_shrink: Mapping[str, int]
    holds: Mapping[str, SizeHold] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def shrinking(self) -> frozenset[str]:
        """The jobs reclaim shrinks instead of evicting (``plan_reclaim(shrinking=...)``)."""
        return frozenset(self.may_shrink)

    def size_of(self, job: ElasticJob) -> int:
        """The size the plan gives ``job`` this round."""
        return next((r.after for r in self.plan.resizes if r.job == job.key), job.size)


def may_shrink(jobs: Sequence[ElasticJob]) -> dict[str, int]:
    """Per job above its minimum, the workers it may give back (its size less its minimum), by key."""
    return {
        j.key: j.size - j.min_workers for j in sorted(jobs, key=lambda j: j.key) if j.size > j.min_workers
    }


def decide_elastic(facts: ElasticRound) -> ElasticDecision:
    """Decide the round (see the module docstring)."""
    jobs, snapshot = facts.jobs, facts.snapshot
    pool = elastic_pool(snapshot, facts.view, jobs)
    elastic = {job.key for job in jobs}
    waiting = [g.key for g in (facts.view.pending if facts.view else ()) if g.key not in elastic]
    deficits = queue_deficits(facts.view, jobs)
    held = live_holds(facts.holds, waiting, facts.now, facts.settings.hold_seconds)
    held = {key: hold for key, hold in held.items() if key in elastic}
    plan, layout = plan_elastic(
        jobs,
        snapshot,
        pool_gpus=pool,
        deficits=deficits,
        now=facts.now,
        last_moved=facts.last_moved,
        settings=facts.settings,
        topologies=facts.topologies,
        models=facts.models,
        attained=facts.attained,
        waiting=waiting,
        held=frozenset(held),
    )
    pins: dict[str, Pins] = {}
    stale: dict[str, Pins] = {}
    for job in sorted(jobs, key=lambda j: j.key):
        target = layout.targets.get(job.key, {})
        chosen = choose_pins(target, job.workers)
        if chosen:
            pins[job.key] = chosen
        moved = stale_pins(target, job.workers)
        if moved:
            stale[job.key] = moved
    holds = next_holds(held, (r.job for r in plan.resizes), waiting, facts.now)
    return ElasticDecision(pool, deficits, plan, layout, pins, stale, may_shrink(jobs), holds)
