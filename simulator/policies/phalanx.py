"""phalanx itself as a simulator policy: every decision is asked of the core the product runs.

Each 60-s step lets the product's control loops run to completion on the simulated cluster, in the
placement manager's order (``placement.__main__``), each through the same core function its entrypoint
calls:

1. **Reclaim** (``scheduling.reclaim_pass.reclaim_plans``): whole gangs of queues above their fair share
   are evicted for a starved queue; the evicted job waits again, keeping its progress (a checkpoint, as
   the loop assumes for every preemption), and pays the restart penalty when it runs again.
2. **Admission rounds** (``scheduling.admission_gates.release``): the gated groups that can start now, in
   the queues' fair order; each released group's pods then go through kube-scheduler's cycle one at a
   time (``scheduling.pod_cycle.schedule_pod``: filter, prioritize, bind through
   ``scheduling.session``): the first member's filter plans and reserves the whole gang, the others
   take their reservation. A gang binds whole or not at all. Rounds repeat until one releases nothing
   (the product runs a round every few seconds; a step is 60 s).
3. **Elastic round** (``scheduling.elastic.plan_elastic``, pool and deficits from
   ``scheduling.elastic.pool``): running elastic jobs are resized between their minimum and maximum and
   consolidated (``simulator.policies.phalanx_elastic`` applies the plan).

The loop charges the restart penalty for every allocation change (start, resize, move) and counts a
gang given fewer GPUs than its minimum. Parameters switch rules off for the ablations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from immutables import Map

from scheduling.admission_gates import GateSettings, ReleasedBook, release
from scheduling.model import Node, Pod
from scheduling.node_ranking import ScoreMemo
from scheduling.pod_cycle import CycleContext, active_queue_order, schedule_pod
from scheduling.promises import PromiseBook
from scheduling.queue_gate import AdmittedBook, RoomMemo
from scheduling.queue_view import view_of
from scheduling.queues import Queue, ReclaimOutcome
from scheduling.reclaim_pass import reclaim_plans
from scheduling.session import SessionSettings
from scheduling.snapshot import ClusterSnapshot
from scheduling.state import state_of
from scheduling.topology import TopologyCache, TopologyDocument
from simulator.cluster import (
    NAMESPACE,
    JobShape,
    Worker,
    allocation_of,
    job_group,
    job_of,
    job_pods,
    make_nodes,
    shape_job,
)
from simulator.gpu_sets import GpuSets
from simulator.loop import Allocation, ClusterView, JobView
from simulator.policies.phalanx_elastic import elastic_round
from simulator.policies.synced_state import JobEntry, SyncedState
from simulator.workloads import PolluxJob

MAX_ROUNDS = 8
"""Admission rounds per step at most (each releases what fits after the one before bound)."""


@dataclass(frozen=True, slots=True)
class PhalanxState:
    """The workers of every running job (waiting jobs are absent) and when each job last moved."""

    workers: Map[str, tuple[Worker, ...]] = field(default_factory=Map)
    last_moved: Map[str, float] = field(default_factory=Map)


@dataclass(frozen=True)
class Phalanx:
    """The policy; each parameter switches one of phalanx's rules on or off (all on by default).

    Attributes:
        name: the name it is reported under.
        elastic: jobs are elastic (one-GPU workers, 1 to the GPUs asked for) and the elastic round
            sizes and moves them; off: rigid gangs of the GPUs asked for.
        topology: node-aware shapes and layout: rigid jobs in node-sized workers, elastic workers placed
            and consolidated by the layout; off: one-GPU workers, grown workers on the first nodes with
            free GPUs, no moves.
        reclaim: the reclaim pass runs (it only acts where queues have quotas).
        keep_state: keep the core's ``ClusterState`` across decisions and rewrite only the jobs that
            changed (``simulator.policies.synced_state``); off: build it from every pod for each look,
            the reference the tests compare decisions with.
        queues: the Queue objects (none: everything in the default queue).
        rack_size: nodes per rack label (0: no racks).
        documents: each node's GPU topology document, by node index, as its ``phalanx.io/gpu-topology``
            annotation holds it (empty: no node has one). With ``topology`` off the nodes carry none:
            the ablation is a cluster without the node agent, so the core takes the lowest free indices.
    """

    name: str = "phalanx"
    elastic: bool = True
    topology: bool = True
    reclaim: bool = True
    keep_state: bool = True
    queues: tuple[Queue, ...] = ()
    rack_size: int = 0
    gates: GateSettings = field(default_factory=GateSettings)
    topologies: TopologyCache = field(default_factory=TopologyCache, compare=False, repr=False)
    documents: tuple[TopologyDocument | None, ...] = field(default=(), repr=False)
    _nodes: dict[tuple[int, int, tuple[int, ...]], tuple[Node, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _synced: dict[tuple[int, int, tuple[int, ...]], SyncedState] = field(
        default_factory=dict, compare=False, repr=False
    )

    def initial(self) -> PhalanxState:
        """No job running."""
        return PhalanxState()

    def minimum_gpus(self, job: PolluxJob) -> int:
        """The GPUs of its gang's minimum: a partial gang is anything less."""
        return 1 if self.elastic and job.num_replicas > 1 else job.num_replicas

    def nodes(self, count: int, per_node: int, sizes: tuple[int, ...] = ()) -> tuple[Node, ...]:
        """The simulated nodes, each with its prepared topology when it has a document (built once).

        ``sizes`` gives each node's GPUs when the nodes are unlike (openb).
        """
        key = (count, per_node, sizes)
        found = self._nodes.get(key)
        if found is None:
            found = make_nodes(count, per_node, rack_size=self.rack_size, sizes=sizes)
            if self.topology and self.documents:
                found = tuple(
                    replace(node, topology=self.topologies.topology(doc)) if doc is not None else node
                    for node, doc in zip(found, self.documents, strict=False)
                )
            self._nodes[key] = found
        return found

    def gpu_sets(self, state: PhalanxState) -> Mapping[str, GpuSets]:
        """The GPU indices the core gave each running job's workers, per node index."""
        out: dict[str, GpuSets] = {}
        for name, workers in state.workers.items():
            by_node: dict[int, list[int]] = {}
            for worker in workers:
                if worker.node is not None:
                    by_node.setdefault(_node_index(worker.node), []).extend(worker.indices)
            out[name] = tuple((node, tuple(sorted(gpus))) for node, gpus in sorted(by_node.items()))
        return out

    def _shape(self, gpus: int, gpus_per_node: int) -> JobShape:
        return shape_job(gpus, gpus_per_node, elastic=self.elastic, node_shaped=self.topology)

    def decide(self, state: PhalanxState, view: ClusterView) -> tuple[PhalanxState, Mapping[str, Allocation]]:
        """Reclaim, admission rounds, elastic round (see the module docstring)."""
        per_node = max(view.nodes, default=0)  # node-shaped workers: the largest node's GPUs at most
        alike = all(count == per_node for count in view.nodes)
        sizes = () if alike else tuple(view.nodes)
        nodes = self.nodes(len(view.nodes), per_node, sizes)
        index_of = {node.name: i for i, node in enumerate(nodes)}
        jobs = {job.name: job for job in view.jobs}
        workers: dict[str, tuple[Worker, ...]] = {k: w for k, w in state.workers.items() if k in jobs}
        synced = None
        if self.keep_state:
            key = (len(view.nodes), per_node, sizes)
            synced = self._synced.get(key)
            if synced is None:
                synced = self._synced[key] = SyncedState(nodes, self.queues)
        world = _World(self, nodes, jobs, workers, per_node, synced)
        if self.reclaim and self.queues:
            world.reclaim(view.now)
        for _ in range(MAX_ROUNDS):
            if not world.admit(view.now):
                break
        last_moved = {k: v for k, v in state.last_moved.items() if k in jobs}
        if self.elastic:
            moved = elastic_round(world, view.now, last_moved, topology=self.topology)
            last_moved.update(dict.fromkeys(moved, float(view.now)))
        allocations = {name: allocation_of(w, index_of) for name, w in world.workers.items()}
        new_state = PhalanxState(Map(world.workers), Map(last_moved))
        return new_state, {name: a for name, a in allocations.items() if a}


def _node_index(name: str) -> int:
    """The loop's index of a node named by ``simulator.cluster.make_nodes`` (``n07`` is 7)."""
    return int(name[1:])


class _World:
    """The cluster during one decision: jobs' workers, and the core's view of them on demand."""

    def __init__(
        self,
        policy: Phalanx,
        nodes: tuple[Node, ...],
        jobs: Mapping[str, JobView],
        workers: dict[str, tuple[Worker, ...]],
        per_node: int,
        synced: SyncedState | None = None,
    ) -> None:
        self.policy = policy
        self.synced = synced
        self.nodes = nodes
        self.jobs = jobs
        self.workers = workers
        self.per_node = per_node
        self.shapes = {name: policy._shape(job.gpus, per_node) for name, job in jobs.items()}

    def pods(self) -> list[Pod]:
        """Every job's worker pods: running ones bound, waiting ones gated at their initial shape."""
        pods: list[Pod] = []
        for name in sorted(self.jobs):
            job = self.jobs[name]
            workers = self.workers.get(name) or self.shapes[name].initial
            pods += job_pods(name, workers, queue=job.queue, submitted=job.submitted)
        return pods

    def snapshot(self, pods: list[Pod] | None = None) -> ClusterSnapshot:
        """The core's snapshot of the world now (of ``pods`` instead of the jobs' when given)."""
        if self.synced is not None and pods is None:
            return self.synced.sync(
                {
                    name: JobEntry(
                        self.workers.get(name) or self.shapes[name].initial,
                        job.queue,
                        job.submitted,
                        self.shapes[name].min_workers,
                    )
                    for name, job in self.jobs.items()
                }
            )
        groups = [job_group(name, self.shapes[name].min_workers) for name in sorted(self.jobs)]
        return state_of(
            self.nodes, self.pods() if pods is None else pods, groups, self.policy.queues
        ).snapshot()

    def reclaim(self, now: int) -> None:
        """Evict the gangs reclaim chooses; their jobs wait again."""
        snapshot = self.snapshot()
        view = view_of(snapshot, PromiseBook(), None)
        shrinking = frozenset(
            f"{NAMESPACE}/{name}"
            for name, w in self.workers.items()
            if len(w) > self.shapes[name].min_workers
        )
        plans = reclaim_plans(snapshot, view, self.policy.topologies, now=now, shrinking=shrinking)
        for plan in plans:
            if plan.outcome is ReclaimOutcome.EVICT:
                for eviction in plan.evictions:
                    self.workers.pop(eviction.gang.partition("/")[2], None)

    def admit(self, now: int) -> bool:
        """One admission round; whether it started any job."""
        snapshot = self.snapshot()
        view = view_of(snapshot, PromiseBook(), None)
        decision = release(
            snapshot,
            PromiseBook(),
            view,
            ReleasedBook(),
            self.policy.topologies,
            now=now,
            settings=self.policy.gates,
        )
        if not decision.released:
            return False
        opened = frozenset(group.group for group in decision.released)  # the product ungates these only
        if self.synced is not None:
            snapshot = self.synced.ungate(sorted(key.partition("/")[2] for key in opened))
        else:
            snapshot = self.snapshot(
                [
                    replace(p, gates=()) if p.gated and p.group_key in opened else p
                    for p in snapshot.all_pods()
                ]
            )
        ctx = CycleContext(
            snapshot,
            view,
            tuple(sorted(snapshot.nodes)),
            float(now),
            SessionSettings(),
            self.policy.topologies,
            ScoreMemo(),
            RoomMemo(),
        )
        book, admitted, started = PromiseBook(), AdmittedBook(), False
        for group in decision.released:
            name = group.group.partition("/")[2]
            if name not in self.jobs or name in self.workers:
                continue
            members = [p for p in snapshot.members(group.group) if p.node_name is None]
            placed: dict[int, Worker] = {}
            for pod in active_queue_order(members):
                cycle = schedule_pod(pod, book, admitted, ctx)
                book, admitted = cycle.promises, cycle.admitted
                if cycle.node is None:
                    break
                placed[job_of(pod.key)[1]] = Worker(pod.requests.gpus, cycle.node, cycle.gpus, now)
            if len(placed) < len(members):  # the barrier never opens: release what the gang holds
                for pod in members:
                    book = book.release(pod.uid)
                continue
            self.workers[name] = tuple(placed[i] for i in sorted(placed))
            started = True
        return started
