"""Queues and their hierarchy: what each team is guaranteed, may borrow and may never exceed.

A queue (the ``queues.scheduling.phalanx.io`` resource, docs/design/queues.md §1) has, per resource, a
``quota`` (deserved: guaranteed whenever the team asks for it), an ``over_quota_weight`` (its share of
what others leave unused) and a ``limit`` (a hard ceiling; ``None`` is unlimited). Queues form a tree
through ``parent``; only leaves hold workloads, so a team's share is always decided at every level above
it. Workloads that name no queue go to ``DEFAULT_QUEUE``, which exists even when nobody created it.

``QueueTree.build`` judges every queue on its own (``scheduling.queues.validation``): a queue that is
invalid is set aside with the queues below it, each with a sentence naming the queue and the rule, and
every other queue stays in force, so one team's mistake never takes another team's queue down.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.cluster.queue_specs import UNLIMITED as UNLIMITED
from scheduling.cluster.queue_specs import Queue as Queue
from scheduling.cluster.queue_specs import QueueError as QueueError
from scheduling.cluster.queue_specs import ResourceQuota as ResourceQuota
from scheduling.cluster.queue_specs import default_queue as default_queue
from scheduling.model import DEFAULT_QUEUE as DEFAULT_QUEUE  # the model's, named here too
from scheduling.queues.validation import judge
from scheduling.resources import RESOURCE_NAMES


@dataclass(frozen=True, slots=True)
class QueueTree:
    """The queues in force, and those set aside with the reason; build it with ``QueueTree.build``.

    Attributes:
        queues: every queue in force by name, the default queue included.
        children: each queue's direct children, sorted by name (leaves map to ``()``).
        roots: the top-level queues, sorted by name.
        rejected: each queue set aside (``scheduling.queues.validation``) with the sentence that says why.
    """

    queues: Mapping[str, Queue]
    children: Mapping[str, tuple[str, ...]] = field(compare=False)
    roots: tuple[str, ...]
    rejected: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def build(cls, queues: Iterable[Queue]) -> QueueTree:
        """The tree of ``queues``: each queue judged on its own, a bad one set aside with its subtree.

        Never raises: a queue that breaks a rule (``scheduling.queues.validation``) is left out of the
        tree, with every queue below it, and listed in ``rejected`` with its reason; every other queue is
        in force as if the bad one were not there. A name given twice sets both aside (the API server
        keys Queues by name, so only a hand-made list can). The default queue is added when absent.
        """
        unique: dict[str, Queue] = {}
        twice: dict[str, str] = {}
        for queue in queues:
            if queue.name in unique:
                twice[queue.name] = f"queue {queue.name}: defined more than once"
            unique[queue.name] = queue
        verdict = judge((q for name, q in unique.items() if name not in twice), default_queue())
        kids: dict[str, list[str]] = {name: [] for name in verdict.in_force}
        for name, queue in verdict.in_force.items():
            if queue.parent is not None:
                kids[queue.parent].append(name)
        children = {name: tuple(sorted(names)) for name, names in kids.items()}
        roots = tuple(sorted(n for n, q in verdict.in_force.items() if q.parent is None))
        rejected = dict(sorted({**verdict.rejected, **twice}.items()))
        return cls(
            MappingProxyType(dict(verdict.in_force)),
            MappingProxyType(children),
            roots,
            MappingProxyType(rejected),
        )

    @property
    def problems(self) -> tuple[str, ...]:
        """One sentence per queue set aside, by queue name (empty when every queue is in force)."""
        return tuple(self.rejected.values())

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

    def top_down(self) -> tuple[str, ...]:
        """Every queue, each parent before its children (depth first, siblings by name), without recursion."""
        order: list[str] = []
        stack = list(reversed(self.roots))
        while stack:
            name = stack.pop()
            order.append(name)
            stack.extend(reversed(self.children[name]))
        return tuple(order)

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
            QueueError: the label names a queue that does not exist, is set aside, or has child queues.
        """
        name = label or DEFAULT_QUEUE
        if name not in self.queues:
            if name in self.rejected:
                raise QueueError([f"{self.rejected[name]}; the queue is set aside until that is fixed"])
            raise QueueError([f"queue {name} does not exist"])
        if not self.is_leaf(name):
            kids = ", ".join(self.children[name])
            raise QueueError([f"queue {name} has child queues ({kids}); only leaf queues hold workloads"])
        return name
