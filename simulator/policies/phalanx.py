"""phalanx itself as a simulator policy: every decision is asked of the core the product runs.

Each 60-s step lets the product's control loops run to completion on the simulated cluster, each
through the same core function its entrypoint calls, in this order (the placement manager's round,
``placement.round``, now sizes elastic jobs before reclaim and has reclaim wait while they shrink; this
policy still sizes them last):

1. **Reclaim** (``scheduling.queues.reclaim_planner.plan_reclaim``): whole gangs of queues above their
   fair share are evicted for a starved queue; the evicted job waits again, keeping its progress (a
   checkpoint, as the loop assumes for every preemption), and pays the restart penalty when it runs
   again.
2. **Admission rounds** (``scheduling.admission.release.release``): the gated groups that can start now, in
   the queues' fair order; each released group's pods then go through kube-scheduler's cycle one at a
   time (``scheduling.offline.cycle.schedule_pod``: filter, prioritize, bind through
   ``scheduling.session``): the first member's filter plans and reserves the whole gang, the others
   take their reservation. A gang binds whole or not at all. Rounds repeat until one releases nothing
   (the product runs a round every few seconds; a step is 60 s).
3. **Elastic round** (``scheduling.elastic.decide.decide_elastic``, the placement manager's elastic
   pass's function): running elastic jobs are resized between their minimum and maximum and
   consolidated (``simulator.policies.phalanx_elastic`` applies the decision). Reclaim (1) reads which
   jobs may shrink from the same module (``may_shrink``).

The policy learns each elastic job's throughput as the placement manager does: from the progress the
job reports (the loop's ``JobView.rate``, what a launcher would report at the size and spread it ran
at), never from the speed model (``scheduling.elastic.throughput.fit`` over those samples).

The loop charges the restart penalty for every allocation change (start, resize, move) and counts a
gang given fewer GPUs than its minimum. Parameters switch rules off for the ablations.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from immutables import Map

from scheduling.admission.release import GateSettings
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic import ElasticSettings
from scheduling.elastic.decide import may_shrink
from scheduling.elastic.size_hold import SizeHold
from scheduling.elastic.throughput import Sample, Throughput, fit
from scheduling.model import Node
from scheduling.queues import Queue
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache, TopologyDocument
from simulator.gpu_sets import GpuSets
from simulator.loop import Allocation, ClusterView, JobView
from simulator.policies.phalanx_elastic import elastic_jobs, elastic_round
from simulator.policies.synced_state import SyncedState
from simulator.policies.world import World, WorldRules
from simulator.simulated_cluster import (
    JobShape,
    Worker,
    allocation_of,
    make_nodes,
    shape_job,
)
from simulator.traces import TraceJob

MAX_ROUNDS = 8
"""Admission rounds per step at most (each releases what fits after the one before bound)."""


@dataclass(frozen=True, slots=True)
class PhalanxState:
    """What the policy carries from one decision to the next.

    The workers of every running job (waiting jobs are absent), when each job last moved, and what it
    learned: each elastic job's reported rate per (workers, nodes) and the model fitted on them; and
    the elastic jobs' holds (``scheduling.elastic.size_hold``), as the placement manager carries them.
    """

    workers: Map[str, tuple[Worker, ...]] = field(default_factory=Map)
    last_moved: Map[str, float] = field(default_factory=Map)
    samples: Map[str, Map[tuple[int, int], float]] = field(default_factory=Map)
    models: Map[str, Throughput] = field(default_factory=Map)
    holds: Map[str, SizeHold] = field(default_factory=Map)


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
        elastic_settings: the elastic round's settings (its sizing rule: ``"goodput"``, or ``"even"``
            for the rule before the throughput model).
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
    elastic_settings: ElasticSettings = field(default_factory=ElasticSettings)
    _nodes: dict[tuple[int, int, tuple[int, ...]], tuple[Node, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _synced: dict[tuple[int, int, tuple[int, ...]], SyncedState] = field(
        default_factory=dict, compare=False, repr=False
    )

    def initial(self) -> PhalanxState:
        """No job running."""
        return PhalanxState()

    def minimum_gpus(self, job: TraceJob) -> int:
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
        shapes = {name: self._shape(job.gpus, per_node) for name, job in jobs.items()}
        rules = WorldRules(self.queues, self.gates, self.topologies)
        world = World(nodes, jobs, workers, shapes, rules, synced)
        if self.reclaim and self.queues:

            def shrinking(snapshot: ClusterSnapshot, queues: QueueView) -> frozenset[str]:
                return frozenset(may_shrink(elastic_jobs(world, snapshot, queues)))

            world.reclaim(view.now, shrinking)
        for _ in range(MAX_ROUNDS):
            if not world.admit(view.now):
                break
        last_moved = {k: v for k, v in state.last_moved.items() if k in jobs}
        samples, models, holds = state.samples, state.models, state.holds
        if self.elastic:
            samples, models = _learn(state, view.jobs, shapes)
            moved, held = elastic_round(
                world,
                view.now,
                last_moved,
                topology=self.topology,
                settings=self.elastic_settings,
                models=models,
                holds=holds,
            )
            holds = Map(held)
            last_moved.update(dict.fromkeys(moved, float(view.now)))
        allocations = {name: allocation_of(w, index_of) for name, w in world.workers.items()}
        new_state = PhalanxState(Map(world.workers), Map(last_moved), samples, models, holds)
        return new_state, {name: a for name, a in allocations.items() if a}


def _learn(
    state: PhalanxState, jobs: tuple[JobView, ...], shapes: Mapping[str, JobShape]
) -> tuple[Map[str, Map[tuple[int, int], float]], Map[str, Throughput]]:
    """Each active elastic job's samples with the rate it reported for the last step, and its refit model.

    One sample per (workers, nodes): the newest, as a launcher reports its current rate. A job that
    reported nothing (it did not train) keeps its model; jobs no longer active are forgotten.
    """
    samples = {k: v for k, v in state.samples.items() if k in shapes}
    models = {k: v for k, v in state.models.items() if k in shapes}
    for job in jobs:
        if job.rate <= 0 or not job.allocation or not shapes[job.name].elastic:
            continue
        config = (len(job.allocation), len(set(job.allocation)))
        seen = samples.get(job.name, Map())
        if seen.get(config) == job.rate:
            continue
        seen = seen.set(config, job.rate)
        samples[job.name] = seen
        models[job.name] = fit(Sample(k, n, rate) for (k, n), rate in seen.items())
    return Map(samples), Map(models)


def _node_index(name: str) -> int:
    """The loop's index of a node named by ``simulator.simulated_cluster.make_nodes`` (``n07`` is 7)."""
    return int(name[1:])
