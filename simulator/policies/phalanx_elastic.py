"""The placement manager's elastic round on the simulated cluster: the core decides, this applies.

``scheduling.elastic.decide.decide_elastic``, the function the placement manager's elastic pass calls,
decides sizes (the pool: free GPUs plus what elastic workers hold, less what waiting gangs need, so a
waiting gang shrinks elastic jobs first; each job's learned throughput and attained service), the
layout on the fewest nodes, and the guarded moves. ``elastic_jobs`` reads the world into the core's
``ElasticJob`` as ``kubeio.mpijobs.elastic_job`` reads MPIJobs. Applying the decision does what the MPI
Operator and the product's webhook do:

- a **shrink** removes the highest replica indices (the operator's rule);
- a **move** re-creates the worker on its target node with the GPUs the plan chose;
- a **growth** creates workers, pinned where the layout has room for them
  (``scheduling.elastic.pinning.choose_pins``) and bound there by the bind verb
  (``scheduling.session.choose_for_bind``, which picks the GPU indices). A worker that finds no room is
  dropped: the next round sizes the job again.

Only running elastic jobs take part: a waiting one starts as a gang of its minimum through the
admission round, like any group.

With ``topology`` off (the ablation) the layout is not followed: no moves, and grown workers go to the
first node, in name order, with a free GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic import ElasticJob, ElasticSettings
from scheduling.elastic.decide import ElasticRound, decide_elastic
from scheduling.elastic.pinning import choose_pins
from scheduling.elastic.size_hold import SizeHold
from scheduling.elastic.throughput import Throughput
from scheduling.gpu.choice import NoGpusError
from scheduling.model import Pod, Resources
from scheduling.queues import QUEUE_LABEL
from scheduling.queues.view import QueueView, view_of
from scheduling.session import SessionSettings, choose_for_bind
from simulator.policies.world import World
from simulator.simulated_cluster import NAMESPACE, Worker, created_at, job_of

_NO_HOLDS: Mapping[str, SizeHold] = MappingProxyType({})


def elastic_jobs(world: World, snapshot: ClusterSnapshot, view: QueueView) -> list[ElasticJob]:
    """The running elastic jobs of ``world`` as the core sees them, by name."""
    running = sorted(name for name in world.workers if world.shapes[name].elastic)
    jobs = []
    for name in running:
        shape, spec = world.shapes[name], world.jobs[name]
        members = snapshot.members(f"{NAMESPACE}/{name}")
        queue = members[0].labels.get(QUEUE_LABEL) if members else None
        jobs.append(
            ElasticJob(
                key=f"{NAMESPACE}/{name}",
                queue=view.tree.workload_queue(queue),
                min_workers=shape.min_workers,
                max_workers=shape.max_workers,
                worker=Resources(gpus=1),
                workers=tuple(sorted(members, key=lambda p: job_of(p.key)[1])),
                created=created_at(spec.submitted),
            )
        )
    return jobs


def elastic_round(
    world: World,
    now: int,
    last_moved: Mapping[str, float],
    *,
    topology: bool,
    settings: ElasticSettings,
    models: Mapping[str, Throughput],
    holds: Mapping[str, SizeHold] = _NO_HOLDS,
) -> tuple[list[str], Mapping[str, SizeHold]]:
    """Resize and move the running elastic jobs of ``world`` in place; return the jobs moved and the holds.

    ``models`` are the jobs' learned throughputs by name (what the loop reported, never the speed
    model itself); attained service is what the loop shows every policy, which is what the placement
    manager's record on the MPIJob counts (``scheduling.elastic.attained``): every worker deletion here
    is a resize or a move, made with a write to the job, except a reclaim's, whose time the product's
    record may miss (a reclaim leaves the Pollux workloads alone: one queue). ``holds`` are the last
    round's (``scheduling.elastic.size_hold``); the ones returned go to the next round, as the placement
    manager carries them.
    """
    if not any(world.shapes[name].elastic for name in world.workers):
        return [], _NO_HOLDS
    snapshot = world.snapshot()
    view = view_of(snapshot, PromiseBook())
    jobs = elastic_jobs(world, snapshot, view)
    facts = ElasticRound(
        jobs,
        snapshot,
        view,
        float(now),
        {f"{NAMESPACE}/{k}": v for k, v in last_moved.items()},
        settings if topology else replace(settings, moves_per_job=0, moves_per_round=0),
        world.rules.topologies,
        {f"{NAMESPACE}/{k}": m for k, m in models.items()},
        {f"{NAMESPACE}/{j.name}": float(j.attained_gpu_seconds) for j in world.jobs.values()},
        holds,
    )
    decision = decide_elastic(facts)
    moved = world.apply(decision.plan, now)
    _grow(world, now, decision.layout.targets if topology else None)
    return moved, decision.holds


def _grow(world: World, now: int, targets: Mapping[str, Mapping[str, int]] | None) -> None:
    """Bind every waiting worker of a running job where it goes, or drop it when nothing has room."""
    if not any(w.node is None for workers in world.workers.values() for w in workers):
        return
    snapshot = world.snapshot()
    book = PromiseBook()
    for name in sorted(world.workers):
        workers = list(world.workers[name])
        if all(w.node is not None for w in workers):
            continue
        members = sorted(snapshot.members(f"{NAMESPACE}/{name}"), key=lambda p: job_of(p.key)[1])
        pins = (
            dict(choose_pins(targets.get(f"{NAMESPACE}/{name}", {}), members)) if targets is not None else {}
        )
        for pod in members:
            node = pins.get(pod) if targets is not None else _first_free(snapshot, book)
            if pod.node_name is not None or node is None:
                continue
            placed = _bind(pod, node, snapshot, book, now, world)
            if placed is not None:
                book, worker = placed
                workers[job_of(pod.key)[1]] = worker
        world.workers[name] = tuple(w for w in workers if w.node is not None)


def _bind(
    pod: Pod, node: str, snapshot: ClusterSnapshot, book: PromiseBook, now: int, world: World
) -> tuple[PromiseBook, Worker] | None:
    try:
        book, promise, _ = choose_for_bind(
            pod,
            node,
            snapshot,
            book,
            now=float(now),
            settings=SessionSettings(),
            topologies=world.rules.topologies,
        )
    except NoGpusError:
        return None
    return book, Worker(pod.requests.gpus, node, promise.gpus, now)


def _first_free(snapshot: ClusterSnapshot, book: PromiseBook) -> str | None:
    for name in sorted(snapshot.nodes):
        free = snapshot.free_on(name, book)
        if free is not None and free.count > 0:
            return name
    return None
