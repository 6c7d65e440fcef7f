"""The discrete-step simulation loop: jobs arrive, a policy allocates GPUs, the speed model trains them.

One step of the Pollux-compatible mode is the artifact's ``Cluster.step`` (``simulator/simulator.py``
on ``petuum/adaptdl`` branch ``osdi21-artifact``), in this order:

1. every job with GPUs trains for the step's seconds; a job whose allocation changed at the last
   decision first spends up to ``restart_penalty_seconds`` of them restarting (no progress);
2. the clock moves one step;
3. the jobs that have arrived by now (``time <= now``) and have not completed are shown to the policy,
   which returns every job's allocation (one node index per GPU); a job whose allocation differs from
   its previous one restarts (the penalty again), a job left out loses its GPUs.

So a job is first scheduled at the first step boundary at or after its arrival, and its JCT counts
from its arrival to the second its last epoch ended. Time is the loop's own counter, never the wall
clock, and the seed reaches the policy as data, so the same input gives the same output.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from scheduling.topology import NodeTopology
from simulator.gpu_sets import ChoosesGpus, SpeedOnSets, judge_placements
from simulator.job_track import Allocation as Allocation  # the Policy protocol's type, imported from here
from simulator.job_track import JobTrack, place, reallocate, result_of, step_record, train
from simulator.results import RunResult, StepRecord
from simulator.speed import SpeedModel
from simulator.traces import TraceJob

S = TypeVar("S")


class SimulationError(RuntimeError):
    """The run cannot go on: a policy broke the cluster's capacity, or the horizon passed."""


@dataclass(frozen=True, slots=True)
class Mode:
    """The simulated cluster and the loop's clock.

    ``node_gpus`` gives each node's GPUs for a cluster of unlike nodes (the openb trace); empty: ``nodes``
    alike nodes of ``gpus_per_node``. With it, ``nodes`` is its length and ``gpus_per_node`` its largest.
    """

    name: str
    nodes: int
    gpus_per_node: int
    step_seconds: int
    restart_penalty_seconds: int
    node_gpus: tuple[int, ...] = ()

    @property
    def capacity(self) -> tuple[int, ...]:
        """Each node's GPUs, by node index."""
        return self.node_gpus or tuple([self.gpus_per_node] * self.nodes)

    def fewest_nodes(self, gpus: int) -> int:
        """The fewest nodes that can hold ``gpus`` GPUs (the largest nodes first).

        >>> Mode("m", 3, 8, 60, 30, node_gpus=(2, 8, 4)).fewest_nodes(9)
        2
        >>> Mode("m", 4, 4, 60, 30).fewest_nodes(9)
        3
        """
        if not self.node_gpus:
            return -(-gpus // self.gpus_per_node)
        held = 0
        for count, size in enumerate(_largest_first(self.node_gpus), start=1):
            held += size
            if held >= gpus:
                return count
        return len(self.node_gpus) + 1


POLLUX = Mode("pollux", nodes=16, gpus_per_node=4, step_seconds=60, restart_penalty_seconds=30)
"""The artifact's defaults: 16 nodes of 4 T4 GPUs, a decision every 60 s, 30 s lost per allocation change."""

MODES: Mapping[str, Mode] = {POLLUX.name: POLLUX}


@dataclass(frozen=True, slots=True)
class JobView:
    """What a policy sees of one active job."""

    name: str
    submitted: int
    gpus: int
    allocation: Allocation
    attained_gpu_seconds: int
    queue: str = "default"
    rate: float = 0.0
    """Progress per second the job reported over its last step's training on ``allocation`` (0: it
    did not train): what a launcher reports, the only speed a learning policy may see."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What a policy sees at one decision: the time, each node's GPUs, the active jobs in workload order.

    ``seed`` is derived from the run's seed and the step, for a policy that wants randomness
    (``numpy.random.default_rng(view.seed)``).
    """

    now: int
    nodes: tuple[int, ...]
    jobs: tuple[JobView, ...]
    seed: int


class Policy(Protocol[S]):
    """A scheduling policy: its own state as a value, and one decision per step.

    ``decide`` returns the next state and the allocation of every job that should hold GPUs; a job it
    leaves out holds none. Returning a job's current allocation unchanged keeps it running without a
    restart.
    """

    @property
    def name(self) -> str:
        """The name the policy is registered and reported under."""
        ...

    def initial(self) -> S:
        """The state before the first decision."""
        ...

    def decide(self, state: S, view: ClusterView) -> tuple[S, Mapping[str, Allocation]]:
        """Allocate GPUs for the step that starts at ``view.now``."""
        ...

    def minimum_gpus(self, job: TraceJob) -> int:
        """The fewest GPUs the policy runs ``job`` with: fewer is a partial gang, which the loop counts."""
        ...


def run(
    jobs: Sequence[TraceJob],
    policy: Policy[Any],
    speed: SpeedModel,
    mode: Mode = POLLUX,
    *,
    seed: int = 0,
    start: int = 0,
    horizon_seconds: int = 60 * 86_400,
    until: int | None = None,
    timeline: bool = False,
    on_step: Callable[[int, int], None] | None = None,
    topologies: Sequence[NodeTopology | None] = (),
) -> RunResult:
    """Simulate ``jobs`` under ``policy`` until every job completed (or the clock reaches ``until``).

    Args:
        jobs: the workload, in its file order (ties are shown to the policy in this order).
        policy: decides allocations each step.
        speed: trains jobs on their placements.
        mode: cluster shape, step length and restart penalty.
        seed: passed to the policy through ``ClusterView.seed``.
        start: the clock's first reading (arrival times are on the same clock).
        horizon_seconds: simulated time after the last arrival after which the run fails instead of
            looping forever (a job that needs more GPUs than the cluster has never starts under a gang
            policy); counted from the last arrival, so a trace of any span (openb's 149 days) replays.
        until: stop at this time and report the jobs not completed by then as unfinished (a trace
            window); ``None``: run until every job completed.
        timeline: keep a ``StepRecord`` per decision (for plots and allocation figures).
        on_step: called after each step with the completed and total job counts (a progress bar).
        topologies: each node's GPU topology, for the NVLink verdict (``simulator.gpu_sets``); empty:
            none judged. GPU indices are tracked either way.

    Raises:
        SimulationError: a policy over-committed a node or named an unknown job, or the horizon passed.
        SpeedError: a job's application or batch has no speed data.
    """
    for spec in jobs:
        speed.check(spec)
    names = [spec.name for spec in jobs]
    if len(set(names)) != len(names):
        msg = "job names repeat"
        raise SimulationError(msg)
    capacity = mode.capacity
    state = policy.initial()
    on_sets = speed if isinstance(speed, SpeedOnSets) else None
    chooses = policy if isinstance(policy, ChoosesGpus) else None
    table = [JobTrack(spec) for spec in jobs]
    arrivals = sorted(range(len(table)), key=lambda i: (table[i].spec.time, i))
    arrived = 0  # arrivals[:arrived] have been shown to the policy
    live: list[int] = []  # arrived and not completed, by workload index: the only jobs a step touches
    remaining = len(table)
    records: list[StepRecord] = []
    now, steps = start, 0
    last_arrival = max([start, *(spec.time for spec in jobs)])
    while remaining and (until is None or now < until):
        if now - last_arrival > horizon_seconds:
            waiting = [table[i].spec.name for i in live]
            msg = (
                f"horizon of {horizon_seconds} s after the last arrival passed with {len(waiting)} "
                f"jobs not completed: {waiting[:5]}"
            )
            raise SimulationError(msg)
        for i in live:  # a job not arrived holds no GPUs and a completed one trains no more
            table[i] = train(table[i], speed, now, mode.step_seconds, on_sets)
        now += mode.step_seconds
        steps += 1
        still = [i for i in live if table[i].completed is None]
        remaining -= len(live) - len(still)
        live = still
        if on_step is not None:
            on_step(len(table) - remaining, len(table))
        first = arrived
        while arrived < len(arrivals) and table[arrivals[arrived]].spec.time <= now:
            arrived += 1
        if arrived > first:
            live = sorted(live + arrivals[first:arrived])
        if not live:
            continue
        active = [table[i] for i in live]
        view = ClusterView(
            now=now,
            nodes=capacity,
            jobs=tuple(
                JobView(
                    j.spec.name,
                    j.spec.time,
                    j.spec.num_replicas,
                    j.allocation,
                    j.attained_gpu_seconds,
                    j.spec.queue,
                    j.rate,
                )
                for j in active
            ),
            seed=seed * 1_000_003 + steps,
        )
        state, decided = policy.decide(state, view)
        _check(decided, {j.spec.name for j in active}, capacity, policy.name, now)
        for i in live:
            job = table[i]
            given = decided.get(job.spec.name, ())
            penalty = mode.restart_penalty_seconds
            table[i] = reallocate(job, given, mode.fewest_nodes, penalty, now, policy.minimum_gpus(job.spec))
        held = {table[i].spec.name: table[i].gpus for i in live if table[i].gpus}
        chosen = chooses.gpu_sets(state) if chooses is not None else {}
        placed = judge_placements(decided, chosen, held, capacity, topologies)
        for i in live:
            table[i] = place(table[i], placed.get(table[i].spec.name), now)
        if timeline:
            records.append(step_record(now, [table[i] for i in live]))
    return RunResult(
        mode=mode.name,
        policy=policy.name,
        seed=seed,
        jobs=tuple(result_of(job) for job in table if job.completed is not None),
        steps=steps,
        capacity=sum(capacity),
        timeline=tuple(records),
        unfinished=tuple(sorted(job.spec.name for job in table if job.completed is None)),
    )


@functools.cache
def _largest_first(sizes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(sorted(sizes, reverse=True))


def _check(
    decided: Mapping[str, Allocation], active: set[str], capacity: tuple[int, ...], policy: str, now: int
) -> None:
    unknown = sorted(set(decided) - active)
    if unknown:
        msg = f"t={now}: policy {policy} allocated to jobs that are not active: {unknown[:5]}"
        raise SimulationError(msg)
    used = Counter(node for allocation in decided.values() for node in allocation)
    for node, count in sorted(used.items()):
        if not 0 <= node < len(capacity) or count > capacity[node]:
            msg = f"t={now}: policy {policy} put {count} GPUs on node {node}"
            raise SimulationError(msg)
