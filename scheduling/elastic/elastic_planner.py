"""One planning round for elastic jobs: sizes, layout, the guarded moves, then growth, as one ``Plan``.

Rules, in the order they apply:

1. **Sizes** (``gain`` by default: the next worker to the job it speeds up most; ``sizing``: evenly,
   the rule kept for comparison): a job shrunk gets a ``Resize`` ("resized 4 -> 2 workers: ..."), a
   job grown gets one after the moves (4); the operator deletes the highest replica indices or
   creates the missing ones. A job grows by at most ``grow_step`` workers a round (the rest in the
   rounds that follow); it shrinks at once.
2. **Layout** (``layout``): the fewest nodes per job, matched to the real nodes for fewest moves, in
   the job's home rack where that costs no move.
3. **Moves**, only where they pay and never where they hurt:
   - *hysteresis*: a job moves only if the target spans fewer nodes than it runs on now (a move must
     save a node), unless it is resized this round or starting: a resize restarts every worker, so
     its moves come with it (one restart, not one more per later round), and a job that started less
     than a restart ago has nothing to lose, not even below its minimum (``is_starting``). For those,
     the cooldown and the per-job limit do not apply either;
   - *never below the minimum*: a move deletes a worker and its operator re-creates it, so a job moves
     at most ``running - min_workers`` workers at once; except a job that grows this round (its resize
     restarts every worker and it trains again only once its new workers are up, so its moved ones
     wait no longer than those) or is starting: that one may move every worker, so a job growing from
     its one worker goes whole to a node with room to grow on rather than spreading for good;
   - *rate limits and cooldown*: at most ``moves_per_job`` per job and ``moves_per_round`` in all per
     round, jobs with the most nodes to save first (then by name), none moved within
     ``cooldown_seconds`` of its last move;
   - a move is tried on a ``Statement``: it goes only where the target node has the room now (a move
     into room another move frees waits for the next round).
4. **Growth** (``growth``), last: the workers a job still needs go to the nodes of its target only as
   far as they have room once the shrinks and moves are made, and a growing job's ``Resize`` goes no
   further than that room ("room for 1 of 2 more workers now"); the rest waits for a later round. A
   growing job whose model has not measured spreading free grows only as far as it stays on the
   fewest nodes for the size it reaches ("... now on the fewest nodes"). The layout returned is the
   one the round reaches (what stays, plus what grows), so no worker is ever pinned to a node that
   another job's worker still fills.
A worker still bound to a node that was deleted runs nowhere: it is neither kept in place nor moved.
Every action carries its reason in words.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from types import MappingProxyType

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.cluster.usage import FreeGpus
from scheduling.elastic.gain import nodes_for, size_by_gain
from scheduling.elastic.growth import reachable
from scheduling.elastic.job import ElasticJob, ElasticSettings
from scheduling.elastic.layout import Layout, kept_running, plan_layout
from scheduling.elastic.shape import reserved_room
from scheduling.elastic.sizing import size_jobs
from scheduling.elastic.throughput import PRIOR, Throughput
from scheduling.gang.gang_planner import DEFAULT_LOCALITY_KEYS
from scheduling.gpu.choice import choose_gpus
from scheduling.model import Pod
from scheduling.plan import Plan
from scheduling.topology import TopologyCache

_NO_PROMISES = PromiseBook()
_NONE: Mapping[str, float] = MappingProxyType({})
_NO_MODELS: Mapping[str, Throughput] = MappingProxyType({})
COMPACT_NOTE = "on the fewest nodes (more would spread it, and it has not measured spreading free)"
"""Why a job grew less than the free GPUs allowed: the compact rule of ``scheduling.elastic.growth``."""
RACK_KEY = DEFAULT_LOCALITY_KEYS[0]
"""The node label naming a node's rack (``phalanx.io/rack``), as the gang planner reads it."""


def elastic_room(snapshot: ClusterSnapshot, jobs: Sequence[ElasticJob]) -> dict[str, int]:
    """Per node, the GPUs elastic workers may use: free GPUs plus what elastic workers hold there."""
    held: dict[str, int] = {}
    for job in jobs:
        for pod in job.workers:
            if pod.holds_resources and pod.node_name is not None:
                held[pod.node_name] = held.get(pod.node_name, 0) + pod.requests.gpus
    room = {}
    for name, node in sorted(snapshot.nodes.items()):
        free = snapshot.free_on(name, _NO_PROMISES)
        usable = node.takes_pods and node.topology_problem is None
        room[name] = (free.count if free is not None else 0) + held.get(name, 0) if usable else 0
    return room


def plan_elastic(
    jobs: Sequence[ElasticJob],
    snapshot: ClusterSnapshot,
    *,
    pool_gpus: int,
    deficits: Mapping[str, int],
    now: float,
    last_moved: Mapping[str, float],
    settings: ElasticSettings,
    topologies: TopologyCache,
    models: Mapping[str, Throughput] = _NO_MODELS,
    attained: Mapping[str, float] = _NONE,
    waiting: Sequence[str] = (),
    held: Container[str] = frozenset(),
) -> tuple[Plan, Layout]:
    """One round (see the module docstring); returns the plan and the layout the round reaches.

    ``models`` (each job's learned throughput) and ``attained`` (its GPU-seconds so far) feed the
    ``"goodput"`` sizing; a job missing from them is sized by the prior (linear) with none attained.
    ``waiting`` names the waiting groups that are not elastic jobs, in their turn: the layout keeps the
    room each will take free (``shape``), and workers in its way move at once. ``held`` names the jobs
    that keep their size (``hold``): the others divide the rest of the pool.
    """
    goals = _goals_holding(jobs, held, snapshot, pool_gpus, deficits, settings, models, attained)
    step = settings.grow_step
    sizes = {j.key: _paced(j, goals[j.key], step) for j in jobs}
    racks = {name: node.labels[RACK_KEY] for name, node in snapshot.nodes.items() if RACK_KEY in node.labels}
    reserved = reserved_room(snapshot, jobs, sizes, waiting, topologies) if waiting else {}
    room = {name: max(0, gpus - reserved.get(name, 0)) for name, gpus in elastic_room(snapshot, jobs).items()}
    layout = plan_layout(jobs, sizes, room, racks)
    statement = Statement(snapshot)
    squeezed = pool_gpus < sum(j.size * j.worker.gpus for j in jobs)  # waiting work takes from the pool
    shrink = "gives GPUs back to waiting work" if squeezed else "gives GPUs to jobs they speed up more"
    for job in sorted(jobs, key=lambda j: j.key):
        if sizes[job.key] < job.size:
            _resize(
                statement,
                job,
                sizes[job.key],
                goals[job.key],
                step,
                shrink,
                removed=job.workers[sizes[job.key] :],
            )
    budget = settings.moves_per_round
    nodes = snapshot.nodes
    for job in sorted(jobs, key=lambda j: (-(len(running_on(j, nodes)) - layout.nodes_of(j.key)), j.key)):
        if budget <= 0:
            break
        budget -= _move(
            job, sizes[job.key], layout, statement, now, last_moved, settings, topologies, budget, reserved
        )
    no_moves = settings.moves_per_round <= 0 or settings.moves_per_job <= 0  # targets never reached
    node_gpus = largest_node(snapshot)
    compact = {  # growing jobs not measured to spread for free grow only as far as they stay compact
        j.key
        for j in jobs
        if sizes[j.key] > j.size
        and not models.get(j.key, PRIOR).spreads_free(
            sizes[j.key], nodes_for(sizes[j.key], j.worker.gpus, node_gpus)
        )
    }
    reached = reachable(
        jobs, sizes, layout, statement, reserved, anywhere=no_moves, compact=compact, node_gpus=node_gpus
    )
    for job in sorted(jobs, key=lambda j: j.key):
        after = min(sizes[job.key], max(job.size, sum(reached.targets[job.key].values())))
        if after > job.size:
            _resize(
                statement,
                job,
                after,
                goals[job.key],
                step,
                "grows into free GPUs",
                wanted=sizes[job.key],
                compact=job.key in reached.held_compact,
            )
    return statement.commit(), reached


def goals_of(
    jobs: Sequence[ElasticJob],
    snapshot: ClusterSnapshot,
    pool_gpus: int,
    deficits: Mapping[str, int],
    settings: ElasticSettings,
    models: Mapping[str, Throughput],
    attained: Mapping[str, float],
) -> dict[str, int]:
    """Each job's target size by the configured sizing rule, before pacing."""
    if settings.sizing == "even":
        return size_jobs(jobs, pool_gpus, deficits)
    return size_by_gain(
        jobs,
        pool_gpus,
        deficits,
        models=models,
        attained=attained,
        settings=settings,
        node_gpus=largest_node(snapshot),
    )


def largest_node(snapshot: ClusterSnapshot) -> int:
    """GPUs of the largest node that takes pods: what the fewest nodes for a size are counted in."""
    return max((n.gpu_total for n in snapshot.nodes.values() if n.takes_pods), default=0)


def _goals_holding(
    jobs: Sequence[ElasticJob],
    held: Container[str],
    snapshot: ClusterSnapshot,
    pool_gpus: int,
    deficits: Mapping[str, int],
    settings: ElasticSettings,
    models: Mapping[str, Throughput],
    attained: Mapping[str, float],
) -> dict[str, int]:
    """Each job's goal, the held jobs at their size; every job afresh when the pool cannot keep them."""
    kept = [j for j in jobs if j.key in held and j.min_workers <= j.size <= j.max_workers]
    kept_gpus = sum(j.size * j.worker.gpus for j in kept)
    if not kept or kept_gpus > pool_gpus:
        return goals_of(jobs, snapshot, pool_gpus, deficits, settings, models, attained)
    keys = {j.key for j in kept}
    others = [j for j in jobs if j.key not in keys]
    goals = goals_of(others, snapshot, pool_gpus - kept_gpus, deficits, settings, models, attained)
    return {**goals, **{j.key: j.size for j in kept}}


def _resize(
    statement: Statement,
    job: ElasticJob,
    after: int,
    goal: int,
    step: int | None,
    why: str,
    *,
    removed: Sequence[Pod] = (),
    wanted: int | None = None,
    compact: bool = False,
) -> None:
    """Record a resize of ``job`` to ``after`` workers with its reason in words.

    ``goal`` is where the sizing rule aims (``after`` is below it when the pace holds it back);
    ``wanted`` the size the job would grow to this round had the room been there; ``compact`` that
    more room was there, on more nodes than the size reached needs (``growth``).
    """
    if wanted is not None and after < wanted:
        why += f", room for {after - job.size} of {wanted - job.size} more workers now"
        if compact:
            why += f" {COMPACT_NOTE}"
    elif after < goal:
        why += f", {step} workers a round toward {goal}"
    statement.resize(
        job.key,
        job.size,
        after,
        f"resized {job.size} -> {after} workers: {why} (min {job.min_workers}, max {job.max_workers})",
        removed=removed,
    )


def is_starting(job: ElasticJob, size: int, now: float, settings: ElasticSettings) -> bool:
    """Whether every worker the job keeps started less than a restart ago (``restart_seconds``).

    Such a job has trained for less than what a restart costs, so moving any of its workers, even its
    last, loses nothing: a job admitted on the node that had room for its minimum goes where it can
    grow in the round it grows. A worker whose start is not known (``started_at`` unset), or stamped
    after ``now`` (a node whose clock runs ahead), counts as long started: a job is never moved below
    its minimum on a guess.
    """
    kept = [p for p in job.workers[:size] if p.holds_resources]
    return bool(kept) and all(
        p.started_at is not None and 0.0 <= now - p.started_at < settings.restart_seconds for p in kept
    )


def _paced(job: ElasticJob, goal: int, step: int | None) -> int:
    """The size a job goes to this round: ``goal``, but at most ``step`` workers more than it has."""
    return goal if step is None else min(goal, max(job.size + step, job.min_workers))


def running_on(job: ElasticJob, nodes: Container[str]) -> dict[str, int]:
    """The job's running workers per node, on ``nodes`` only (a worker on a deleted node runs nowhere)."""
    return {node: count for node, count in job.running_on().items() if node in nodes}


def _move(
    job: ElasticJob,
    size: int,
    layout: Layout,
    statement: Statement,
    now: float,
    last_moved: Mapping[str, float],
    settings: ElasticSettings,
    topologies: TopologyCache,
    budget: int,
    reserved: Mapping[str, int],
) -> int:
    """Move up to the job's allowance of workers toward its target; return how many moved.

    A move off a node a waiting gang's room is kept on (``reserved``) is made at once, whether or not
    it saves a node, past the cooldown and the per-job limit: the gang waits for nothing else. So is
    every move of a job resized this round (it restarts anyway: its target is reached with one restart,
    not one more per later round) and of a starting job (``is_starting``: nothing to lose yet, so not
    even its minimum stays). A job that grows this round may go below its minimum too: it trains again
    only once its new workers are up, and a moved worker is re-created beside them.
    """
    nodes = statement.snapshot.nodes
    current = kept_running(job, size, nodes)
    target = layout.targets.get(job.key, {})
    surplus = [node for node in sorted(current) if current[node] > target.get(node, 0)]
    for_room = any(reserved.get(node, 0) for node in surplus)
    starting = is_starting(job, size, now, settings)
    free = for_room or starting or size != job.size  # a restart paid anyway, or a gang waiting
    if not layout.moves.get(job.key) or (len(target) >= len(current) and not free):
        return 0  # nothing to move, or moving would neither save a node nor make a gang's room
    if not free and now - last_moved.get(job.key, float("-inf")) < settings.cooldown_seconds:
        return 0
    per_job = budget if free else settings.moves_per_job
    floor = 0 if starting or size > job.size else job.min_workers
    allowance = min(per_job, budget, sum(running_on(job, nodes).values()) - floor)
    surplus.sort(key=lambda node: (not reserved.get(node, 0), node))
    needy = [node for node in sorted(target) if target[node] > current.get(node, 0)]
    movers = [p for p in reversed(job.workers[:size]) if p.node_name in surplus and p.holds_resources]
    moved = 0
    for pod in movers:
        if moved >= allowance or not needy:
            break
        node = needy[0]
        room = statement.room(node)
        if room is None or not room.fits(pod):
            needy.pop(0)
            continue
        gpus = choose_gpus(room.node, FreeGpus(room.free, room.count), pod.requests.gpus, topologies)
        why = _why_moved(job.key, pod.node_name or "", reserved, len(target), len(current), size, job.size)
        statement.move(pod, node, gpus, f"moved {pod.name} from {pod.node_name} to {node} {why}")
        moved += 1
        current[node] = current.get(node, 0) + 1
        if current[node] >= target[node]:
            needy.pop(0)
    return moved


def _why_moved(
    key: str, source: str, reserved: Mapping[str, int], spans: int, spanned: int, size: int, was: int
) -> str:
    """The reason a worker moves, as its event says it.

    A move that saves no node is made only when it costs no restart of its own (``_move``): the
    job restarts for its resize this round, or is starting. Its reason says so, rather than comparing
    node counts that did not change.
    """
    if reserved.get(source, 0):
        return f"to make room on {source} for a waiting gang"
    if spans < spanned:
        return f"to fit {key} on {spans} node{'s' if spans != 1 else ''}, not {spanned}"
    cause = f"restarts to resize to {size} workers" if size != was else "is starting"
    return f"to its planned node while {key} {cause} (a move then costs no restart of its own)"
