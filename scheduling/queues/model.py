"""Queues and their hierarchy: what each team is guaranteed, may borrow and may never exceed.

A queue (the ``queues.scheduling.phalanx.io`` resource, architecture.md §4) has, per resource, a
``quota`` (deserved: guaranteed whenever the team asks for it), an ``over_quota_weight`` (its share of
what others leave unused) and a ``limit`` (a hard ceiling; ``None`` is unlimited). Queues form a tree
through ``parent``; only leaves hold workloads, so a team's share is always decided at every level above
it. Workloads that name no queue go to ``DEFAULT_QUEUE``, which exists even when nobody created it.

``QueueTree.build`` checks a whole set of queues at once and either returns the tree or raises
``QueueError`` listing every problem, each naming the queue and the field: an invalid queue changes
nothing, so the previous tree stays in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.model import Resources
from scheduling.resources import CPU, GPU, MEMORY, RESOURCE_NAMES, format_amount, resources_of

DEFAULT_QUEUE = "default"
"""The cluster-wide queue of workloads that name none; created implicitly with quota 0 and weight 1."""


class QueueError(ValueError):
    """A set of queues that cannot be used as it is; ``problems`` lists every reason, one sentence each."""

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
    """

    name: str
    parent: str | None = None
    gpu: ResourceQuota = UNLIMITED
    cpu: ResourceQuota = UNLIMITED
    memory: ResourceQuota = UNLIMITED
    min_runtime_seconds: int | None = None
    created: str = ""

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


def _field_problems(queue: Queue) -> list[str]:
    problems = []
    for resource in RESOURCE_NAMES:
        q = queue.of(resource)
        where = f"queue {queue.name}: {resource}"
        if q.quota < 0:
            problems.append(f"{where} quota is {format_amount(resource, q.quota)}; it must be 0 or more")
        if q.over_quota_weight < 0:
            problems.append(f"{where} overQuotaWeight is {q.over_quota_weight}; it must be 0 or more")
        if q.limit is not None and q.limit < 0:
            problems.append(f"{where} limit is {format_amount(resource, q.limit)}; it must be 0 or more")
        elif q.limit is not None and q.limit < q.quota:
            limit, quota = format_amount(resource, q.limit), format_amount(resource, q.quota)
            problems.append(f"{where} limit {limit} is below its quota {quota}")
    if queue.min_runtime_seconds is not None and queue.min_runtime_seconds < 0:
        problems.append(
            f"queue {queue.name}: minRuntimeSeconds is {queue.min_runtime_seconds}; it must be 0 or more"
        )
    if queue.parent == queue.name:
        problems.append(f"queue {queue.name}: parent names the queue itself")
    return problems


def _cycles(parents: Mapping[str, str | None]) -> list[str]:
    """One sentence per parent cycle, starting at its smallest name so the text is stable."""
    problems, settled = [], set[str]()
    for start in sorted(parents):
        chain: list[str] = []
        node: str | None = start
        while node is not None and node in parents and node not in settled and node not in chain:
            chain.append(node)
            node = parents[node]
        if node is not None and node in chain:
            cycle = chain[chain.index(node) :]
            if len(cycle) > 1:
                first = cycle.index(min(cycle))
                cycle = cycle[first:] + cycle[:first]
                path = " -> ".join([*cycle, cycle[0]])
                problems.append(f"queues {', '.join(sorted(cycle))} form a parent cycle ({path})")
        settled.update(chain)
    return problems


def _sum_problems(queues: Mapping[str, Queue], children: Mapping[str, tuple[str, ...]]) -> list[str]:
    problems = []
    for name, kids in sorted(children.items()):
        for resource in RESOURCE_NAMES:
            own = queues[name].of(resource).quota
            parts = [(kid, queues[kid].of(resource).quota) for kid in kids]
            summed = sum(quota for _, quota in parts)
            if summed > own:
                listed = ", ".join(f"{kid} {format_amount(resource, q)}" for kid, q in parts if q)
                problems.append(
                    f"queue {name}: its children's {resource} quotas sum to {format_amount(resource, summed)}"
                    f" ({listed}), over its own quota {format_amount(resource, own)}"
                )
    return problems


@dataclass(frozen=True, slots=True)
class QueueTree:
    """A validated set of queues; build it with ``QueueTree.build``.

    Attributes:
        queues: every queue by name, the default queue included.
        children: each queue's direct children, sorted by name (leaves map to ``()``).
        roots: the top-level queues, sorted by name.
    """

    queues: Mapping[str, Queue]
    children: Mapping[str, tuple[str, ...]] = field(compare=False)
    roots: tuple[str, ...]

    @classmethod
    def build(cls, queues: Iterable[Queue], *, holding_workloads: Iterable[str] = ()) -> QueueTree:
        """Validate ``queues`` as a whole and return the tree, adding the default queue when absent.

        Args:
            queues: every queue of the cluster (or the proposed new set, when checking a change).
            holding_workloads: names of queues that workloads currently name; such a queue must stay a
                leaf.

        Raises:
            QueueError: listing every problem: a duplicate name, a negative quota, weight or limit, a
                limit below the quota, an unknown parent, a parent cycle, children whose quotas sum over
                their parent's, a queue with both workloads and children, a default queue with children.
        """
        problems: list[str] = []
        by_name: dict[str, Queue] = {}
        for queue in queues:
            if not queue.name:
                problems.append("a queue has an empty name")
            elif queue.name in by_name:
                problems.append(f"queue {queue.name}: defined more than once")
            by_name[queue.name] = queue
        by_name.setdefault(DEFAULT_QUEUE, default_queue())
        for name in sorted(by_name):
            problems.extend(_field_problems(by_name[name]))
            parent = by_name[name].parent
            if parent is not None and parent != name and parent not in by_name:
                problems.append(f"queue {name}: parent {parent} does not exist")
        problems.extend(_cycles({n: q.parent for n, q in by_name.items()}))
        if problems:
            raise QueueError(problems)
        kids: dict[str, list[str]] = {name: [] for name in by_name}
        for name, queue in by_name.items():
            if queue.parent is not None:
                kids[queue.parent].append(name)
        children = {name: tuple(sorted(names)) for name, names in kids.items()}
        parents = {name: names for name, names in children.items() if names}
        problems.extend(_sum_problems(by_name, parents))
        for name in sorted(set(holding_workloads) & set(parents)):
            problems.append(
                f"queue {name}: holds workloads but has child queues ({', '.join(parents[name])}); "
                "only leaf queues hold workloads"
            )
        if DEFAULT_QUEUE in parents:
            problems.append(
                f"queue {DEFAULT_QUEUE}: the default queue takes workloads that name no queue, "
                "so it cannot have child queues"
            )
        if problems:
            raise QueueError(problems)
        roots = tuple(sorted(n for n, q in by_name.items() if q.parent is None))
        return cls(MappingProxyType(dict(sorted(by_name.items()))), MappingProxyType(children), roots)

    def __getitem__(self, name: str) -> Queue:
        return self.queues[name]

    def __contains__(self, name: object) -> bool:
        return name in self.queues

    def is_leaf(self, name: str) -> bool:
        """Whether the queue has no children, i.e. may hold workloads."""
        return not self.children[name]

    def leaves(self) -> tuple[str, ...]:
        """Every leaf queue, sorted by name."""
        return tuple(name for name in self.queues if self.is_leaf(name))

    def path(self, name: str) -> tuple[str, ...]:
        """The queue's ancestors from the top level down to the queue itself."""
        chain = [name]
        while (parent := self.queues[chain[-1]].parent) is not None:
            chain.append(parent)
        return tuple(reversed(chain))

    @property
    def quota_resources(self) -> tuple[str, ...]:
        """The resources some queue has a quota for; the others are shared by weight alone.

        Quota rules (a group within its deserved quota, non-preemptible work only within quota) look at
        these resources only: in a cluster where only GPUs have quotas, the CPU a GPU job also asks for
        does not make it "over quota".
        """
        return tuple(r for r in RESOURCE_NAMES if any(self.queues[q].of(r).quota > 0 for q in self.roots))

    def min_runtime_seconds(self, name: str) -> int:
        """The queue's minimum runtime: its own value, else the nearest ancestor's, else 0."""
        for queue in reversed(self.path(name)):
            if self.queues[queue].min_runtime_seconds is not None:
                return self.queues[queue].min_runtime_seconds or 0
        return 0

    def workload_queue(self, label: str | None) -> str:
        """The queue a workload goes to, from its ``phalanx.io/queue`` label (none: the default queue).

        Raises:
            QueueError: the label names a queue that does not exist or that has child queues.
        """
        name = label or DEFAULT_QUEUE
        if name not in self.queues:
            raise QueueError([f"queue {name} does not exist"])
        if not self.is_leaf(name):
            kids = ", ".join(self.children[name])
            raise QueueError([f"queue {name} has child queues ({kids}); only leaf queues hold workloads"])
        return name
