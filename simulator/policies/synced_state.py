"""The core's ``ClusterState`` kept across a run's decisions and brought up to date by the jobs that changed.

The phalanx policy shows the core the simulated cluster as a snapshot several times per decision
(reclaim, each admission round before and after its gates open, the elastic round). Building it from
every pod each time (``scheduling.cluster.state.state_of``) recounted every node twice, which made the
snapshot half of a decision's cost and grew with the cluster (1,000 nodes) rather than with what changed.

``SyncedState`` holds one ``ClusterState`` per policy and cluster, and ``sync`` rewrites only the pods of
the jobs whose entry (workers, queue, submission, minimum) differs from the one it holds, and forgets
the jobs that left: the state then holds exactly the pods and PodGroups that ``state_of`` would be given,
which the simulator's tests check decision by decision against the rebuilt state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import state_of
from scheduling.model import Node
from scheduling.queues import Queue
from simulator.simulated_cluster import NAMESPACE, Worker, job_group, job_pods


@dataclass(frozen=True, slots=True)
class JobEntry:
    """What one job's pods and PodGroup are made of: equal entries make equal pods."""

    workers: tuple[Worker, ...]
    queue: str
    submitted: int
    min_workers: int


class SyncedState:
    """One cluster's ``ClusterState``, kept in step with the jobs it is given (see the module docstring)."""

    def __init__(self, nodes: Sequence[Node], queues: Iterable[Queue]) -> None:
        self._state = state_of(nodes, (), (), queues)
        self._held: dict[str, tuple[JobEntry | None, tuple[str, ...]]] = {}
        """Each job's entry as its pods are in the state (``None``: rewritten since) and its pods' UIDs."""

    def sync(self, entries: Mapping[str, JobEntry]) -> ClusterSnapshot:
        """The snapshot of exactly ``entries``' pods and PodGroups."""
        state = self._state
        for name in sorted(self._held.keys() - entries.keys()):
            for uid in self._held.pop(name)[1]:
                state.remove_pod(uid)
            state.remove_group(f"{NAMESPACE}/{name}")
        for name in sorted(entries):
            entry = entries[name]
            held = self._held.get(name)
            if held is not None and held[0] == entry:
                continue
            pods = job_pods(name, entry.workers, queue=entry.queue, submitted=entry.submitted)
            uids = tuple(pod.uid for pod in pods)
            for uid in sorted(set(held[1] if held is not None else ()) - set(uids)):
                state.remove_pod(uid)
            for pod in pods:
                if state.pod(pod.uid) != pod:
                    state.put_pod(pod)
            if held is None or held[0] is None or held[0].min_workers != entry.min_workers:
                state.put_group(job_group(name, entry.min_workers))
            self._held[name] = (entry, uids)
        return state.snapshot()

    def ungate(self, jobs: Iterable[str]) -> ClusterSnapshot:
        """The snapshot with the gates of ``jobs``' pods removed (kube-scheduler's view once they open).

        The jobs touched are written back, gated again, at the next ``sync``.
        """
        state = self._state
        for name in sorted(set(jobs) & self._held.keys()):
            entry, uids = self._held[name]
            if entry is None or all(worker.node is not None for worker in entry.workers):
                continue  # already open, or every worker bound
            for uid in uids:
                pod = state.pod(uid)
                if pod is not None and pod.gated:
                    state.put_pod(replace(pod, gates=()))
            self._held[name] = (None, uids)
        return state.snapshot()
