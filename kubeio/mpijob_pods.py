"""Which pods are an MPIJob's, in which role and order, and which of them carries its progress report.

The MPI Operator (v0.7.0) labels every pod it creates for a job with the job's name
(``training.kubeflow.org/job-name``) and its role (``training.kubeflow.org/job-role``: ``launcher`` or
``worker``), and each worker with its replica index (``training.kubeflow.org/replica-index``; the operator
removes the highest indices when replicas go down). These labels are the only link from a pod to its job
that phalanx reads, in the elastic pass, the pin webhook and the test bed's simulated launchers.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduling.model import Pod

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
"""The MPIJob's name, on its launcher and its workers."""

ROLE_LABEL = "training.kubeflow.org/job-role"
"""``launcher`` or ``worker``."""

INDEX_LABEL = "training.kubeflow.org/replica-index"
"""A worker's index among the job's workers, from 0."""


def workers_of(namespace: str, job: str, pods: Iterable[Pod]) -> tuple[Pod, ...]:
    """The worker pods of MPIJob ``namespace/job``, by replica index (then name)."""
    mine = [
        p
        for p in pods
        if p.namespace == namespace
        and p.labels.get(JOB_NAME_LABEL) == job
        and p.labels.get(ROLE_LABEL) == "worker"
    ]
    return tuple(sorted(mine, key=lambda pod: (replica_index(pod), pod.name)))


def replica_index(pod: Pod) -> int:
    """The worker's replica index (a label the operator sets), past any real one if unreadable."""
    text = pod.labels.get(INDEX_LABEL, "")
    return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else 1 << 30


def report_on_pods(namespace: str, job: str, pods: Iterable[Pod]) -> tuple[str, str] | None:
    """The progress report (``kubeio.progress``) on MPIJob ``namespace/job``'s pods, and the pod's key.

    The job's reporting process writes it on the pod it runs in: the launcher's, or a worker's (under
    ``mpirun``, rank 0 runs in worker 0 unless the launcher runs as a worker). When several of its pods
    carry one (the role that reports changed), the launcher's is taken, then the worker of the lowest
    index, then by name: one rule, so a replayed pass reads the same report. Pods being deleted are
    skipped: their report is of a run that is ending.
    """
    found = [
        p
        for p in pods
        if p.progress is not None
        and not p.terminating
        and p.namespace == namespace
        and p.labels.get(JOB_NAME_LABEL) == job
    ]
    if not found:
        return None
    first = min(found, key=lambda p: (p.labels.get(ROLE_LABEL) != "launcher", replica_index(p), p.name))
    return first.progress or "", first.key
