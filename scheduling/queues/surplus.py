"""A gang's surplus: the members it runs above its ``minMember``, which it can lose one by one.

A gang runs all together or not at all, but only down to its PodGroup's ``minMember``: an elastic MPIJob
(``schedulingPolicy.minAvailable`` = launcher + fewest workers) running more workers than that keeps
training when one of them goes. So preemption may take up to ``running - minMember`` members alone, and
evicts the gang whole only beyond that (``scheduling.queues.preemption``).

Two limits keep this safe:

- only live members count: bound, not finished and not already terminating (a member on its way out
  has already been taken from the surplus);
- the leader never goes alone (``is_leader``), whatever the count: the others are useless without it.

A gang whose PodGroup is unknown has no surplus: without ``minMember`` nothing says how many it can lose.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ROLE_LABEL = "training.kubeflow.org/job-role"
"""Pod label that Kubeflow's operators (MPI Operator v2, the training operator) set to a pod's role."""

LEADER_ROLES = frozenset({"launcher", "master"})
"""Roles that lead a job: the MPIJob's launcher, the PyTorchJob's and TFJob's master."""


def is_leader(labels: Mapping[str, str]) -> bool:
    """Whether a pod leads its job, and so never goes alone.

    The MPI launcher runs ``mpirun``/``horovodrun`` and the PyTorch/TF master hosts the rendezvous: the
    workers are useless without it, so taking it alone stops the job while it still holds the workers'
    GPUs. Kubeflow's operators label it ``training.kubeflow.org/job-role`` = ``launcher`` or ``master``.

    >>> is_leader({"training.kubeflow.org/job-role": "launcher"})
    True
    >>> is_leader({"training.kubeflow.org/job-role": "worker"})
    False
    """
    return labels.get(ROLE_LABEL) in LEADER_ROLES


@dataclass(frozen=True, slots=True)
class GangSize:
    """How many members a gang runs and how few it may run with.

    Attributes:
        running: its live members (bound, not finished, not terminating).
        min_member: its PodGroup's ``minMember``.
    """

    running: int
    min_member: int

    @property
    def surplus(self) -> int:
        """The members it can lose and keep running (never negative).

        >>> GangSize(7, 5).surplus, GangSize(4, 5).surplus
        (2, 0)
        """
        return max(0, self.running - self.min_member)

    def describe(self, gang: str) -> str:
        """``gang ml/job runs 7 members, 2 above its minMember 5``."""
        above = f"{self.surplus} above its minMember {self.min_member}"
        return f"gang {gang} runs {self.running} members, {above}"
