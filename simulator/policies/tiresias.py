"""The Tiresias-like baseline exactly as the Pollux artifact defines it (``simulator/tiresias.py``).

Tiresias (Gu et al., NSDI'19) orders jobs by two-dimensional attained service (GPUs x time) in
discretized priority queues. The Pollux artifact's version, which produced the published Tiresias JCTs,
is narrower, and these are the facts this module reproduces:

- **Two queues.** Every job enters queue 0 when the policy first sees it. A running job moves to the end
  of queue 1 once ``executed seconds x requested GPUs`` reaches 16 GPU-hours (57,600 GPU-s); it never
  moves back (the artifact's starvation rule is present but switched off, ``solve_starvation = 0``).
- **Executed time** counts wall seconds between decisions during which the policy had marked the job
  running, restart penalty included; a job pending at a decision gains nothing for the next step.
- **Admission by GPU count only.** Walking queue 0 then queue 1, each in its order (arrival, resp.
  demotion), a job runs if its requested GPUs fit in the cluster's GPUs not yet given to jobs ahead of
  it; otherwise it pends, and if it was running it is preempted. A job that does not fit does not block
  the ones behind it (they may fit).
- **Placement.** A job that keeps running keeps its GPUs. A newly running job takes its GPUs one node at
  a time from the node with the most free GPUs (ties: lowest node index), as many as that node has or
  the job still needs. Fragmentation is never refused: the speed model charges for spanning nodes.
- A job always gets exactly its ``num_replicas`` GPUs; batch sizes stay fixed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from immutables import Map

from simulator.loop import Allocation, ClusterView
from simulator.traces import TraceJob

QUEUE_THRESHOLD_GPU_SECONDS = 16 * 3600
"""Attained service that moves a job from queue 0 to queue 1 (the artifact's ``_queue_threshold``)."""


@dataclass(frozen=True, slots=True)
class TiresiasState:
    """The queues in order, which jobs the last decision ran, and each job's executed seconds."""

    queue0: tuple[str, ...] = ()
    queue1: tuple[str, ...] = ()
    running: frozenset[str] = frozenset()
    executed: Map[str, int] = field(default_factory=Map)
    last_check: Map[str, int] = field(default_factory=Map)


@dataclass(frozen=True, slots=True)
class Tiresias:
    """The policy; its only parameter is the demotion threshold."""

    threshold_gpu_seconds: int = QUEUE_THRESHOLD_GPU_SECONDS
    name: str = "tiresias"

    def initial(self) -> TiresiasState:
        """No job seen yet."""
        return TiresiasState()

    def minimum_gpus(self, job: TraceJob) -> int:
        """A strict gang: every GPU it asked for."""
        return job.num_replicas

    def decide(
        self, state: TiresiasState, view: ClusterView
    ) -> tuple[TiresiasState, Mapping[str, Allocation]]:
        """Update queues and attained service, admit by queue order, place the newly admitted."""
        jobs = {job.name: job for job in view.jobs}
        queue0 = [name for name in state.queue0 if name in jobs]
        queue1 = [name for name in state.queue1 if name in jobs]
        known = set(queue0) | set(queue1)
        queue0 += [job.name for job in view.jobs if job.name not in known]
        executed = state.executed.mutate()
        last_check = state.last_check.mutate()
        for job in view.jobs:
            if job.name in state.running:
                executed[job.name] = executed.get(job.name, 0) + view.now - last_check.get(job.name, 0)
                if job.name in queue0 and executed[job.name] * job.gpus >= self.threshold_gpu_seconds:
                    queue0.remove(job.name)
                    queue1.append(job.name)
            last_check[job.name] = view.now
        for gone in set(state.executed) - set(jobs):
            del executed[gone]
        for gone in set(state.last_check) - set(jobs):
            del last_check[gone]

        free_count = sum(view.nodes)
        running: list[str] = []
        for name in queue0 + queue1:
            if jobs[name].gpus <= free_count:
                running.append(name)
                free_count -= jobs[name].gpus
        allocations: dict[str, Allocation] = {
            name: jobs[name].allocation for name in running if jobs[name].allocation
        }
        free = {node: count for node, count in enumerate(view.nodes)}
        for allocation in allocations.values():
            for node in allocation:
                free[node] -= 1
        for name in running:
            if name not in allocations:
                allocations[name] = _most_free_first(free, jobs[name].gpus)
        new_state = TiresiasState(
            queue0=tuple(queue0),
            queue1=tuple(queue1),
            running=frozenset(running),
            executed=executed.finish(),
            last_check=last_check.finish(),
        )
        return new_state, allocations


def _most_free_first(free: dict[int, int], gpus: int) -> Allocation:
    """Take GPUs node by node, the node with the most free first, lowest index on ties; updates ``free``."""
    taken: list[int] = []
    while len(taken) < gpus:
        node = max(sorted(free), key=lambda n: free[n])
        count = min(free[node], gpus - len(taken))
        if count <= 0:
            msg = f"no free GPU left for a job of {gpus} GPUs"
            raise ValueError(msg)
        taken += [node] * count
        free[node] -= count
    return tuple(taken)
