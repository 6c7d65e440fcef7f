"""Every queue's figures in one row: what it is promised, holds, deserves and waits for, per resource.

The queue view (``scheduling.queues.view``) holds these figures for the decisions; the Queue status
(``kubeio.render.queue_status``), the placement manager's metrics and ``phalanx queues`` show them. This
module lays them out once, in tree order, and names the two situations an operator looks for:

- *over fair share*: the queue holds more than its fair share of some resource (reclaim may take the
  excess back for a queue below its share);
- *starved*: the queue holds less than its quota of a resource quotas govern while work of its own
  waits for that resource (its quota is guaranteed, so something is keeping it waiting).
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.queues import QueueTree
from scheduling.queues.view import QueueView, pending_of
from scheduling.resources import CPU, GPU, MEMORY, amount


@dataclass(frozen=True, slots=True)
class ResourceFigures:
    """One resource of one queue, in the core's integers (GPUs, milli-CPU, bytes).

    Attributes:
        resource: ``nvidia.com/gpu``, ``cpu`` or ``memory``.
        quota: the configured quota.
        weight: the over-quota weight.
        limit: the hard limit, ``None`` for none.
        allocated: what its workloads hold (for a parent, its subtree's).
        deserved: its in-quota share now (the quota, capped by its demand).
        fair_share: its fair share now.
        pending: what its waiting groups ask for (for a parent, its subtree's).
    """

    resource: str
    quota: int
    weight: int
    limit: int | None
    allocated: int
    deserved: int
    fair_share: int
    pending: int


@dataclass(frozen=True, slots=True)
class QueueFigures:
    """One queue's row.

    Attributes:
        name: the queue.
        parent: its parent, ``None`` at the top level.
        depth: 0 at the top level, one more per level below.
        leaf: whether it holds workloads (no children).
        resources: one entry per shown resource, GPU first.
        over_fair_share: it holds more than its fair share of some resource.
        starved: it holds less than its quota of a quota-governed resource its waiting work asks for.
    """

    name: str
    parent: str | None
    depth: int
    leaf: bool
    resources: tuple[ResourceFigures, ...]
    over_fair_share: bool
    starved: bool


def shown_resources(tree: QueueTree) -> tuple[str, ...]:
    """GPU always; CPU and memory when some queue sets a quota, a limit or a weight other than 1 for them.

    >>> from scheduling.queues import Queue, ResourceQuota
    >>> shown_resources(QueueTree.build([Queue("a", cpu=ResourceQuota(quota=4000))]))
    ('nvidia.com/gpu', 'cpu')
    """
    unset = (0, 1, None)

    def is_set(resource: str) -> bool:
        for queue in tree.queues.values():
            share = queue.of(resource)
            if (share.quota, share.over_quota_weight, share.limit) != unset:
                return True
        return False

    return (GPU, *(r for r in (CPU, MEMORY) if is_set(r)))


def tree_order(tree: QueueTree) -> tuple[tuple[str, int], ...]:
    """Every queue with its depth, parents before their children, siblings by name."""
    order: list[tuple[str, int]] = []
    stack = [(root, 0) for root in reversed(tree.roots)]
    while stack:
        name, depth = stack.pop()
        order.append((name, depth))
        stack.extend((kid, depth + 1) for kid in reversed(tree.children[name]))
    return tuple(order)


def queue_rows(view: QueueView) -> tuple[QueueFigures, ...]:
    """Every queue of ``view``'s tree in tree order, with the figures of :func:`shown_resources`.

    >>> from scheduling.model import Node, Pod, Resources
    >>> from scheduling.cluster.promises import PromiseBook
    >>> from scheduling.queues.view import view_of
    >>> from scheduling.queues import Queue, ResourceQuota
    >>> from scheduling.cluster.state import state_of
    >>> pod = Pod("u", "ml", "p", Resources(gpus=4), scheduler_name="phalanx",
    ...           labels={"phalanx.io/queue": "a"})
    >>> snapshot = state_of([Node("n", Resources(gpus=8))], [pod], [], [Queue("a", gpu=ResourceQuota(2))])
    >>> rows = queue_rows(view_of(snapshot.snapshot(), PromiseBook()))
    >>> [(r.name, r.resources[0].quota, r.resources[0].pending, r.starved) for r in rows]
    [('a', 2, 4, True), ('default', 0, 0, False)]
    """
    tree = view.tree
    resources = shown_resources(tree)
    rows: list[QueueFigures] = []
    for name, depth in tree_order(tree):
        queue, state, share = tree[name], view.states[name], view.shares[name]
        pending = pending_of(view, name)
        figures = tuple(
            ResourceFigures(
                resource=r,
                quota=queue.of(r).quota,
                weight=queue.of(r).over_quota_weight,
                limit=queue.of(r).limit,
                allocated=amount(state.allocated, r),
                deserved=amount(share.deserved, r),
                fair_share=amount(share.fair_share, r),
                pending=amount(pending, r),
            )
            for r in resources
        )
        over = any(amount(state.allocated, r) > amount(share.fair_share, r) for r in resources)
        starved = any(
            amount(state.allocated, r) < queue.of(r).quota and amount(pending, r) > 0
            for r in tree.quota_resources
        )
        rows.append(QueueFigures(name, queue.parent, depth, tree.is_leaf(name), figures, over, starved))
    return tuple(rows)
