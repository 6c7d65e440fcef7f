"""Whose quota a workload is: Kueue's, or phalanx's queues' (docs/kueue.md).

Kueue stamps ``kueue.x-k8s.io/podset`` (``KUEUE_PODSET_LABEL``) on the pod templates of every job it
admits, but not every pod of such a job carries it: the MPI Operator v0.7 builds an MPIJob's launcher
from a Job template of its own, without the MPIJob's launcher labels, so the launcher of an MPIJob Kueue
admitted has none. A gang is one workload, so it is Kueue's when any member carries the label, and every
member, the launcher too, is then charged to no queue of phalanx's.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod


def kueue_groups(pods: Iterable[Pod]) -> frozenset[str]:
    """The keys of the gangs among ``pods`` that Kueue admitted (any member stamped)."""
    return frozenset(p.group_key for p in pods if p.group_key is not None and p.quota_by_kueue)


def by_kueue(pod: Pod, groups: Set[str]) -> bool:
    """Whether ``pod``'s quota is Kueue's, given the gangs Kueue admitted (``kueue_groups``)."""
    return pod.quota_by_kueue or (pod.group_key is not None and pod.group_key in groups)


def gang_by_kueue(pod: Pod, snapshot: ClusterSnapshot) -> bool:
    """Whether ``pod``'s quota is Kueue's: stamped itself, or a member of a gang with a stamped member."""
    if pod.quota_by_kueue:
        return True
    return pod.group_key is not None and any(m.quota_by_kueue for m in snapshot.members(pod.group_key))
