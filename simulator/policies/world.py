"""The simulated cluster during one decision of the phalanx policy, and the core's rounds on it.

``World`` holds each active job's workers (a job absent from ``workers`` waits, gated, at its initial
shape) and shows the core a snapshot of them on demand, kept across decisions by ``SyncedState`` or
built from every pod (the reference). Its rounds are the placement manager's and kube-scheduler's,
each through the core function its entrypoint calls: ``reclaim`` (``plan_reclaim``) and ``admit``
(``release``, then ``schedule_pod`` for each released gang's members, all or nothing). The elastic
round (``simulator.policies.phalanx_elastic``) works on the same world.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from scheduling.admission.queue_hold import AdmittedBook, RoomMemo
from scheduling.admission.release import GateSettings, ReleasedBook, release
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.model import Node, Pod
from scheduling.nodes.ranking import ScoreMemo
from scheduling.offline.cycle import CycleContext, active_queue_order, schedule_pod
from scheduling.plan import Plan
from scheduling.queues import Queue
from scheduling.queues.reclaim_planner import plan_reclaim
from scheduling.queues.view import QueueView, view_of
from scheduling.session import SessionSettings
from scheduling.topology import TopologyCache
from simulator.loop import JobView
from simulator.policies.synced_state import JobEntry, SyncedState
from simulator.simulated_cluster import JobShape, Worker, job_group, job_of, job_pods


@dataclass(frozen=True, slots=True)
class WorldRules:
    """What the policy's configuration gives every round: the Queues, the gates' settings, the topologies."""

    queues: tuple[Queue, ...]
    gates: GateSettings
    topologies: TopologyCache


class World:
    """The cluster during one decision: jobs' workers, and the core's view of them on demand."""

    def __init__(
        self,
        nodes: tuple[Node, ...],
        jobs: Mapping[str, JobView],
        workers: dict[str, tuple[Worker, ...]],
        shapes: Mapping[str, JobShape],
        rules: WorldRules,
        synced: SyncedState | None = None,
    ) -> None:
        self.nodes = nodes
        self.jobs = jobs
        self.workers = workers
        self.shapes = shapes
        self.rules = rules
        self.synced = synced

    def workers_of(self, name: str) -> tuple[Worker, ...]:
        """Job ``name``'s workers: its running ones, or its initial shape while it waits."""
        return self.workers.get(name) or self.shapes[name].initial

    def pods(self) -> list[Pod]:
        """Every job's worker pods: running ones bound, waiting ones gated at their initial shape."""
        pods: list[Pod] = []
        for name in sorted(self.jobs):
            job = self.jobs[name]
            pods += job_pods(name, self.workers_of(name), queue=job.queue, submitted=job.submitted)
        return pods

    def snapshot(self, pods: list[Pod] | None = None) -> ClusterSnapshot:
        """The core's snapshot of the world now (of ``pods`` instead of the jobs' when given)."""
        if self.synced is not None and pods is None:
            return self.synced.sync(
                {
                    name: JobEntry(
                        self.workers_of(name), job.queue, job.submitted, self.shapes[name].min_workers
                    )
                    for name, job in self.jobs.items()
                }
            )
        groups = [job_group(name, self.shapes[name].min_workers) for name in sorted(self.jobs)]
        return state_of(
            self.nodes, self.pods() if pods is None else pods, groups, self.rules.queues
        ).snapshot()

    def reclaim(self, now: int, shrinking: Callable[[ClusterSnapshot, QueueView], frozenset[str]]) -> None:
        """Evict the gangs reclaim chooses; their jobs wait again.

        ``shrinking`` says, from the snapshot and view reclaim decides on, which jobs give room back by
        shrinking (the elastic decision's ``may_shrink``, as the placement manager's round hands it).
        """
        snapshot = self.snapshot()
        view = view_of(snapshot, PromiseBook())
        reclaim = plan_reclaim(
            snapshot, view, self.rules.topologies, now=now, shrinking=shrinking(snapshot, view)
        )
        self.apply(reclaim.plan, now)

    def apply(self, plan: Plan, now: int) -> list[str]:
        """Carry out a core plan on the jobs, as the placement manager's appliers do on a cluster.

        An eviction takes its gang's workers away (reclaim evicts gangs whole; the job waits again, at
        its initial shape); a resize keeps the lowest indices and adds waiting workers (``_grow`` in
        ``simulator.policies.phalanx_elastic`` binds them); a migration puts its worker on the target
        with the GPUs the plan chose, restarted ``now``. Assignments are bound by ``admit``.

        Returns:
            The jobs a migration moved, sorted.
        """
        for eviction in plan.evictions:
            self.workers.pop(eviction.group.partition("/")[2], None)
        for resize in plan.resizes:
            name = resize.job.partition("/")[2]
            kept = self.workers[name][: resize.after]
            self.workers[name] = kept + tuple(Worker(1) for _ in range(resize.after - len(kept)))
        moved = []
        for move in plan.migrations:
            name, index = job_of(move.pod)
            workers = list(self.workers[name])
            if index < len(workers):
                workers[index] = Worker(1, move.target, move.gpus, now)
                self.workers[name] = tuple(workers)
                moved.append(name)
        return sorted(set(moved))

    def admit(self, now: int) -> bool:
        """One admission round; whether it started any job."""
        snapshot = self.snapshot()
        view = view_of(snapshot, PromiseBook())
        decision = release(
            snapshot,
            PromiseBook(),
            view,
            ReleasedBook(),
            self.rules.topologies,
            now=now,
            settings=self.rules.gates,
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
            self.rules.topologies,
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
