"""The heap-based order_pending gives exactly the order of the plain rule (pick the best head each time)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.model import Resources
from scheduling.queues import (
    PendingGroup,
    Queue,
    QueueState,
    QueueTree,
    ResourceQuota,
    fair_shares,
    queue_states,
)
from scheduling.queues.ordering import _head_key, order_pending, within_queue_key
from scheduling.resources import ZERO, plus


def reference_order(
    groups: Iterable[PendingGroup], states: Mapping[str, QueueState], capacity: Resources
) -> tuple[PendingGroup, ...]:
    """The rule as first written: scan every queue for the best head, every time."""
    lines: dict[str, list[PendingGroup]] = {}
    for group in groups:
        lines.setdefault(group.queue, []).append(group)
    for line in lines.values():
        line.sort(key=within_queue_key, reverse=True)
    extra: dict[str, Resources] = {}
    order: list[PendingGroup] = []
    while lines:
        queue = min(lines, key=lambda q: _head_key(lines[q][-1], states[q], extra, capacity))
        head = lines[queue].pop()
        order.append(head)
        for ancestor in states[queue].path():
            extra[ancestor.name] = plus(extra.get(ancestor.name, ZERO), head.requests)
        if not lines[queue]:
            del lines[queue]
    return tuple(order)


@settings(max_examples=120, deadline=None)
@given(
    quotas=st.lists(st.integers(0, 8), min_size=2, max_size=5),
    nested=st.booleans(),
    sizes=st.lists(
        st.tuples(st.integers(0, 4), st.integers(1, 8), st.integers(0, 2)), min_size=1, max_size=25
    ),
)
def test_heap_order_equals_the_plain_rule(
    quotas: list[int], nested: bool, sizes: list[tuple[int, int, int]]
) -> None:
    parent = "dept" if nested else None
    queues = [Queue(f"q{i}", parent=parent, gpu=ResourceQuota(q, 1 + i % 3)) for i, q in enumerate(quotas)]
    if nested:
        queues.append(Queue("dept", gpu=ResourceQuota(sum(quotas), 1)))
    tree = QueueTree.build(queues)
    groups = [
        PendingGroup(
            f"ns/g{i}",
            f"q{q % len(quotas)}",
            Resources(gpus=g),
            priority=p,
            created=f"2026-01-01T00:00:{i:02d}Z",
        )
        for i, (q, g, p) in enumerate(sizes)
    ]
    capacity = Resources(milli_cpu=64_000, memory=2**40, gpus=24)
    demand: dict[str, Resources] = {}
    for group in groups:
        demand[group.queue] = plus(demand.get(group.queue, ZERO), group.requests)
    shares = fair_shares(tree, capacity, demand)
    states = queue_states(tree, shares, {})
    assert order_pending(groups, states, capacity) == reference_order(groups, states, capacity)
