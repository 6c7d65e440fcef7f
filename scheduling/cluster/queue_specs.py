"""A queue as it is written: its quota, weight and limit per resource, its parent, its minimum runtime.

Part of the cluster as the core keeps it (``scheduling.cluster.state`` holds them as they were written);
the rules that read them live above, in ``scheduling.queues``: ``model`` builds the validated tree from
them and ``validation`` judges each one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.model import DEFAULT_QUEUE, Resources
from scheduling.resources import CPU, GPU, MEMORY, RESOURCE_NAMES, resources_of


class QueueError(ValueError):
    """A queue a workload cannot go to; ``problems`` lists every reason, one sentence each."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """One resource of a queue, in the core's integers (GPUs, milli-CPU, bytes).

    Attributes:
        quota: deserved amount, guaranteed when demanded.
        over_quota_weight: relative share of unused capacity beyond the quota; 0 borrows nothing.
        limit: hard ceiling on what the queue may hold, or ``None`` for no ceiling.
    """

    quota: int = 0
    over_quota_weight: int = 1
    limit: int | None = None


UNLIMITED = ResourceQuota()


@dataclass(frozen=True, slots=True)
class Queue:
    """One queue as the core needs it.

    Attributes:
        name: the queue's name (cluster-scoped).
        parent: the parent queue's name, or ``None`` for a top-level queue.
        gpu: ``nvidia.com/gpu`` quota, weight and limit.
        cpu: ``cpu`` quota, weight and limit (milli-CPU).
        memory: ``memory`` quota, weight and limit (bytes).
        min_runtime_seconds: how long a workload of this queue runs before reclaim or preemption may take
            it; ``None`` inherits the nearest ancestor's value (none at all when no ancestor sets one).
        created: ``metadata.creationTimestamp`` as RFC 3339 text, the last tie-break between queues.
        problem: why the adapter could not read the Queue object (an amount that is no quantity, a field
            of the wrong type), or ``None``; such a queue is set aside with its subtree, with this reason.
    """

    name: str
    parent: str | None = None
    gpu: ResourceQuota = UNLIMITED
    cpu: ResourceQuota = UNLIMITED
    memory: ResourceQuota = UNLIMITED
    min_runtime_seconds: int | None = None
    created: str = ""
    problem: str | None = None

    def of(self, resource: str) -> ResourceQuota:
        """The queue's settings for one resource name (``nvidia.com/gpu``, ``cpu``, ``memory``)."""
        if resource == GPU:
            return self.gpu
        if resource == CPU:
            return self.cpu
        if resource == MEMORY:
            return self.memory
        msg = f"unknown resource {resource!r}"
        raise ValueError(msg)

    @property
    def quota(self) -> Resources:
        """The deserved quota of every resource."""
        return resources_of({r: self.of(r).quota for r in RESOURCE_NAMES})

    @property
    def limits(self) -> Mapping[str, int]:
        """The resources that have a limit, with the limit; a missing resource is unlimited."""
        return MappingProxyType({r: limit for r in RESOURCE_NAMES if (limit := self.of(r).limit) is not None})


def default_queue() -> Queue:
    """The implicit default queue: top level, quota 0 and weight 1 for every resource, no limit."""
    return Queue(DEFAULT_QUEUE)
