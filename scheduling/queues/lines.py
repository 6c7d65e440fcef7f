"""The pending groups kept between queue views: each figured when its pods change, each line kept sorted.

A queue view orders every pending group (``scheduling.queues.ordering``), and the groups released and
not bound yet are pending too. Figuring each group from its pods, summing what each queue waits for and
sorting every line again per view cost O(pods waiting) per view; the placement manager builds a view per
cluster version, and with 3,000 pods in flight a view took about 14 ms of a door decision's 17. Between
two views a few groups change, so ``PendingLines`` keeps each group's ``PendingGroup``, each queue's
line sorted by ``within_queue_key`` (a changed group is taken out and put back by bisection) and each
queue's waiting sum, and the view is assembled from them; only the order across queues is made per view.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from scheduling.model import QUEUE_LABEL, Pod, Resources, group_key
from scheduling.queues.ordering import within_queue_key
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.workloads import PREEMPTIBLE_LABEL, PendingGroup, is_preemptible
from scheduling.resources import ZERO, minus, plus, total


class PendingLines:
    """Pending groups by key, the lines per queue and the sums per queue, kept as groups change."""

    def __init__(self) -> None:
        self._groups: dict[str, PendingGroup] = {}
        self._lines: dict[str, list[PendingGroup]] = {}
        self._sums: dict[str, Resources] = {}

    @staticmethod
    def of(waiting: Mapping[str, Sequence[Pod]], tree: QueueTree) -> PendingLines:
        """The lines of ``waiting`` (group key to its waiting pods, sorted by key)."""
        lines = PendingLines()
        for key in sorted(waiting):
            lines.put(key, waiting[key], tree)
        return lines

    def clear(self) -> None:
        """Forget every group (the queues changed: every group is figured again)."""
        self._groups.clear()
        self._lines.clear()
        self._sums.clear()

    def put(self, key: str, members: Sequence[Pod], tree: QueueTree) -> None:
        """Group ``key`` with these waiting pods, sorted by key (none: it waits no more)."""
        old = self._groups.pop(key, None)
        if old is not None:
            line = self._lines[old.queue]
            del line[bisect.bisect_left(line, within_queue_key(old), key=within_queue_key)]
            if not line:
                del self._lines[old.queue]
            left = minus(self._sums[old.queue], old.requests)
            if old.queue in self._lines:
                self._sums[old.queue] = left
            else:
                del self._sums[old.queue]
        if not members:
            return
        group = self._groups[key] = pending_group(members[0], members, tree)
        line = self._lines.setdefault(group.queue, [])
        bisect.insort(line, group, key=within_queue_key)
        self._sums[group.queue] = plus(self._sums.get(group.queue, ZERO), group.requests)

    def lines(self) -> Mapping[str, Sequence[PendingGroup]]:
        """Each queue's line, sorted by ``within_queue_key`` (read-only; valid until the next change)."""
        return MappingProxyType(self._lines)

    def sums(self) -> Mapping[str, Resources]:
        """What each queue's pending groups request, summed."""
        return MappingProxyType(self._sums)


def with_group(
    lines: Mapping[str, Sequence[PendingGroup]], group: PendingGroup
) -> Mapping[str, Sequence[PendingGroup]]:
    """``lines`` with ``group`` put in its queue's line (a copy of that line only)."""
    line = list(lines.get(group.queue, ()))
    bisect.insort(line, group, key=within_queue_key)
    return MappingProxyType({**lines, group.queue: line})


def pending_group(pod: Pod, members: Iterable[Pod], tree: QueueTree) -> PendingGroup:
    """The pending group ``pod`` belongs to (all unbound members of its gang, or the pod alone).

    Raises:
        QueueError: the pod's queue label names a queue that does not exist or is not a leaf.
    """
    queue = tree.workload_queue(pod.labels.get(QUEUE_LABEL))
    waiting = [m for m in members if m.node_name is None and not m.terminating] or [pod]
    one = waiting[0] if len(waiting) == 1 else None  # a pod on its own: its own figures, no sums
    return PendingGroup(
        key=group_key(pod),
        queue=queue,
        requests=one.requests if one else total(m.requests for m in waiting),
        priority=pod.priority,
        created=one.created if one else min(m.created for m in waiting),
        preemptible=is_preemptible(pod.priority, pod.labels.get(PREEMPTIBLE_LABEL)),
    )
