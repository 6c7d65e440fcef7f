"""The order in which pending groups get their turn, across queues and within a queue.

Rules (docs/design/queues.md §3):

- between queues: a group whose queue stays within its deserved quota with it goes first, then one whose
  queue stays within its fair share, then the rest; inside each band the queue with the smaller dominant
  resource share (counting the group, ``scheduling.queues.drf``) goes first, then the older group, then
  names;
- within a queue: higher priority first, then older, then name.

A queue's standing is the worst along its path: a team inside a department that is over its fair share
is over it too. The order is built one group at a time, as if each group took its requests when its turn
came, so a queue with many groups does not keep the head of the line after it got its share.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from scheduling.model import Resources
from scheduling.queues.drf import dominant_share
from scheduling.queues.fair_share import FairShares
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.workloads import PendingGroup
from scheduling.resources import RESOURCE_NAMES, ZERO, amount, plus, total


@dataclass(frozen=True, slots=True)
class QueueState:
    """What admission and ordering need to know about one queue now.

    Attributes:
        name: the queue.
        quota: its configured quota.
        limits: resources with a limit, and the limit.
        deserved: its in-quota share now (``scheduling.queues.fair_share``).
        fair_share: its fair share now.
        allocated: what its workloads hold (for a parent: its subtree's).
        allocated_non_preemptible: the part of ``allocated`` held by non-preemptible workloads.
        quota_resources: the resources quotas govern in this cluster (``QueueTree.quota_resources``).
        created: the queue's creation time as RFC 3339 text.
        parent: the parent's state, or ``None`` at the top level.
    """

    name: str
    quota: Resources
    limits: Mapping[str, int]
    deserved: Resources
    fair_share: Resources
    allocated: Resources
    allocated_non_preemptible: Resources = ZERO
    quota_resources: tuple[str, ...] = RESOURCE_NAMES
    created: str = ""
    parent: QueueState | None = None

    def path(self) -> tuple[QueueState, ...]:
        """This queue and its ancestors, nearest first."""
        chain: list[QueueState] = [self]
        while (parent := chain[-1].parent) is not None:
            chain.append(parent)
        return tuple(chain)


def queue_states(
    tree: QueueTree,
    shares: FairShares,
    allocated: Mapping[str, Resources],
    non_preemptible: Mapping[str, Resources] | None = None,
) -> Mapping[str, QueueState]:
    """Build every queue's state; a parent's allocation is the sum over its leaves.

    Args:
        tree: the validated queues.
        shares: the fair-share result for the same tree.
        allocated: per leaf queue, what its running workloads hold.
        non_preemptible: per leaf queue, the part held by non-preemptible workloads.
    """
    held_np = non_preemptible or {}
    states: dict[str, QueueState] = {}

    bottom_up = tuple(reversed(tree.top_down()))

    def subtotals(by_leaf: Mapping[str, Resources]) -> dict[str, Resources]:
        """Per queue, the sum over its leaves: children before parents, each queue once, no recursion."""
        sums: dict[str, Resources] = {}
        for name in bottom_up:
            kids = tree.children[name]
            sums[name] = total(sums[kid] for kid in kids) if kids else by_leaf.get(name, ZERO)
        return sums

    held, held_non_preemptible = subtotals(allocated), subtotals(held_np)

    pending: list[tuple[str, QueueState | None]] = [(root, None) for root in reversed(tree.roots)]
    while pending:
        name, parent = pending.pop()
        queue, share = tree[name], shares[name]
        state = QueueState(
            name,
            queue.quota,
            queue.limits,
            share.deserved,
            share.fair_share,
            held[name],
            held_non_preemptible[name],
            tree.quota_resources,
            queue.created,
            parent,
        )
        states[name] = state
        pending.extend((kid, state) for kid in reversed(tree.children[name]))
    return MappingProxyType(dict(sorted(states.items())))


class Standing(enum.IntEnum):
    """Where a queue would stand with one more group; lower goes first."""

    WITHIN_DESERVED = 0
    WITHIN_FAIR_SHARE = 1
    OVER_FAIR_SHARE = 2


def _fits(used: Resources, bound: Resources, resources: Iterable[str]) -> bool:
    return all(amount(used, r) <= amount(bound, r) for r in resources)


def standing(
    state: QueueState, requests: Resources, extra: Mapping[str, Resources] | None = None
) -> Standing:
    """Where ``state``'s queue stands if a group with ``requests`` also ran, the worst along its path.

    Deserved quota is compared on the resources quotas govern (``QueueState.quota_resources``); fair
    share on every resource. ``extra`` adds allocation not yet in the states (groups ordered earlier).
    """
    worst = Standing.WITHIN_DESERVED
    for queue in state.path():
        held = plus(plus(queue.allocated, (extra or {}).get(queue.name, ZERO)), requests)
        if not _fits(held, queue.fair_share, RESOURCE_NAMES):
            return Standing.OVER_FAIR_SHARE
        if not _fits(held, queue.deserved, queue.quota_resources):
            worst = Standing.WITHIN_FAIR_SHARE
    return worst


def within_queue_key(group: PendingGroup) -> tuple[int, str, str]:
    """Sort key inside one queue: higher priority, then older, then name."""
    return (-group.priority, group.created, group.key)


def _head_key(
    head: PendingGroup, state: QueueState, extra: Mapping[str, Resources], capacity: Resources
) -> tuple[Standing, Fraction, str, str, str]:
    held = plus(plus(state.allocated, extra.get(state.name, ZERO)), head.requests)
    return (
        standing(state, head.requests, extra),
        dominant_share(held, capacity),
        head.created,
        state.created,
        state.name,
    )


def order_pending(
    groups: Iterable[PendingGroup], states: Mapping[str, QueueState], capacity: Resources
) -> tuple[PendingGroup, ...]:
    """Return every pending group in the order they get their turn (see the module rules).

    Raises:
        ValueError: a group names a queue with no state.
    """
    lines: dict[str, list[PendingGroup]] = {}
    for group in groups:
        lines.setdefault(group.queue, []).append(group)
    for line in lines.values():
        line.sort(key=within_queue_key)
    return order_lines(lines, states, capacity)


def order_lines(
    lines: Mapping[str, Sequence[PendingGroup]], states: Mapping[str, QueueState], capacity: Resources
) -> tuple[PendingGroup, ...]:
    """The fair order of the pending groups, from each queue's line sorted by ``within_queue_key``.

    The next group is always the head of the queue with the smallest ``_head_key``. Keys are kept in a
    heap and refreshed lazily: ordering a group adds to the allocation of its queue and its ancestors,
    which can only make their descendants' keys larger (a worse standing, a larger dominant share), so a
    stale key is a lower bound; when one comes out of the heap it is recomputed and pushed back, and the
    first fresh key out is the true minimum. That keeps 50,000 groups in 1,000 queues to a fraction of a
    second instead of a scan of every queue per group. The lines are taken sorted, so that a caller
    that keeps them between views (``scheduling.queues.lines``) does not sort them per view.

    Raises:
        ValueError: a group names a queue with no state.
    """
    waiting = {queue: line for queue, line in lines.items() if line}
    for queue, line in waiting.items():
        if queue not in states:
            msg = f"group {line[0].key} names queue {queue}, which has no state"
            raise ValueError(msg)
    if len(waiting) <= 1:
        # One queue waits: every turn takes its head, whatever the keys say; a backlog in one queue (a
        # cluster without Queue objects has only the default one) is ordered without computing any.
        return tuple(next(iter(waiting.values()), ()))
    extra: dict[str, Resources] = {}
    changes: dict[str, int] = {}
    paths = {queue: tuple(a.name for a in states[queue].path()) for queue in waiting}
    heads = dict.fromkeys(waiting, 0)

    def stamp(queue: str) -> tuple[int, ...]:
        return tuple(changes.get(name, 0) for name in paths[queue])

    heap = [
        (_head_key(line[0], states[queue], extra, capacity), queue, stamp(queue))
        for queue, line in waiting.items()
    ]
    heapq.heapify(heap)
    order: list[PendingGroup] = []
    while heap:
        _, queue, seen = heapq.heappop(heap)
        line = waiting[queue]
        if seen != stamp(queue):
            head = line[heads[queue]]
            heapq.heappush(heap, (_head_key(head, states[queue], extra, capacity), queue, stamp(queue)))
            continue
        head = line[heads[queue]]
        heads[queue] += 1
        order.append(head)
        for name in paths[queue]:
            extra[name] = plus(extra.get(name, ZERO), head.requests)
            changes[name] = changes.get(name, 0) + 1
        if heads[queue] < len(line):
            after = line[heads[queue]]
            heapq.heappush(heap, (_head_key(after, states[queue], extra, capacity), queue, stamp(queue)))
    return tuple(order)
