"""Fair share: how much of each resource every queue should hold now, given what all queues ask for.

The rule is the published Run:ai / KAI one (docs/design/queues.md §2, docs/design/anchors.md §3.1), applied
per resource and per level of the hierarchy, top level first:

1. **Quota first.** Each queue gets ``min(quota, wants)``, where ``wants`` is its demand capped by its
   limit. If those amounts together exceed the capacity (quotas over-subscribe the cluster), they are
   scaled down in proportion to the quotas instead, water-filling so nobody gets more than it wants.
2. **Then the unused rest**, split in proportion to ``over_quota_weight`` among the queues that still
   want more, each capped by what it wants; what a capped queue cannot take goes round again to the
   others (water-filling) until the rest or the wants run out. Weight 0 borrows nothing.
3. A parent's fair share is then the capacity its children divide the same way.

Results are integers (GPUs, milli-CPU, bytes). Each round hands out ``floor`` of the exact share and
the units lost to rounding one at a time by largest remainder, ties by queue name, so the same input
always gives the same answer and the shares of one level never sum past what that level divides.

Run:ai's worked example (20 unused GPUs, weights 2, 3, 1): the second project gets ``3/6 x 20 = 10``
over its quota of 6, a fair share of 16 (see ``divide``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from scheduling.model import Resources
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.recent_usage import UsageWeighting
from scheduling.resources import RESOURCE_NAMES, ZERO, amount, minus, resources_of


@dataclass(frozen=True, slots=True)
class Claim:
    """One queue's claim on one resource at one level.

    Attributes:
        name: the queue.
        quota: its deserved amount.
        weight: its over-quota weight.
        wants: the most it can use now: its demand, capped by its limit.
    """

    name: str
    quota: int
    weight: int
    wants: int


@dataclass(frozen=True, slots=True)
class Split:
    """One queue's part of one resource: the in-quota part and the whole fair share."""

    deserved: int
    fair_share: int


def _water_fill(
    rest: int, rooms: Mapping[str, int], weights: Mapping[str, Fraction], usage: UsageWeighting | None
) -> dict[str, int]:
    """Hand out up to ``rest`` units in proportion to ``weights``, nobody past its room."""
    gains = dict.fromkeys(rooms, 0)
    active = sorted(n for n in rooms if rooms[n] > 0 and weights[n] > 0)
    while rest > 0 and active:
        raw = {n: weights[n] for n in active}
        share_weights = raw if usage is None else usage.share_weights(raw)
        whole = sum(share_weights.values(), Fraction(0))
        exact = {n: rest * share_weights[n] / whole for n in active}
        full = [n for n in active if exact[n] >= rooms[n] - gains[n]]
        if full:
            for n in full:
                rest -= rooms[n] - gains[n]
                gains[n] = rooms[n]
            active = [n for n in active if n not in full]
            continue
        floors = {n: int(exact[n]) for n in active}
        leftover = rest - sum(floors.values())
        by_remainder = sorted(active, key=lambda n: (-(exact[n] - floors[n]), n))
        for n in active:
            gains[n] += floors[n]
        for n in by_remainder[:leftover]:
            gains[n] += 1
        rest = 0
    return gains


def divide(
    capacity: int, claims: Sequence[Claim], *, usage: UsageWeighting | None = None
) -> dict[str, Split]:
    """Divide ``capacity`` units of one resource among sibling queues: quota first, then weights.

    Args:
        capacity: what this level divides (the cluster's capacity, or the parent's fair share).
        claims: the sibling queues; names must be unique.
        usage: historical usage that moves the over-quota weights (``scheduling.queues.recent_usage``); off by
            default.

    Returns:
        Per queue name, its in-quota part and its fair share; the fair shares sum to at most
        ``capacity`` and each is at most the claim's ``wants``.

    Run:ai's worked example: quotas 4, 6 and 2 on 32 GPUs leave 20 unused; weights 2, 3, 1 give the
    second project 10 more (3/6 x 20), a fair share of 16; the first gets 20 x 2/6 = 6.67, rounded up to
    7 by the largest remainder, and the third 3.33, rounded down to 3.

    >>> shares = divide(32, [Claim("p1", 4, 2, 100), Claim("p2", 6, 3, 100), Claim("p3", 2, 1, 100)])
    >>> [(s.deserved, s.fair_share) for s in shares.values()]
    [(4, 11), (6, 16), (2, 5)]
    """
    if capacity < 0:
        msg = f"capacity must be 0 or more, got {capacity}"
        raise ValueError(msg)
    names = [c.name for c in claims]
    if len(set(names)) != len(names):
        msg = f"claims name a queue more than once: {sorted(names)}"
        raise ValueError(msg)
    in_quota = {c.name: max(0, min(c.quota, c.wants)) for c in claims}
    if sum(in_quota.values()) <= capacity:
        deserved = in_quota
    else:
        deserved = _water_fill(capacity, in_quota, {c.name: Fraction(max(0, c.quota)) for c in claims}, None)
    rest = capacity - sum(deserved.values())
    rooms = {c.name: max(0, c.wants - deserved[c.name]) for c in claims}
    over = _water_fill(rest, rooms, {c.name: Fraction(max(0, c.weight)) for c in claims}, usage)
    return {c.name: Split(deserved[c.name], deserved[c.name] + over[c.name]) for c in claims}


@dataclass(frozen=True, slots=True)
class QueueShare:
    """A queue's division result, every resource at once.

    Attributes:
        name: the queue.
        wants: what it could use now: its demand capped by its limit (for a parent, what its children can
            take, capped by its own limit).
        deserved: the in-quota part: ``min(quota, wants)``, or less when quotas over-subscribe capacity.
        fair_share: ``deserved`` plus its part of the unused rest.
    """

    name: str
    wants: Resources
    deserved: Resources
    fair_share: Resources

    @property
    def over_quota(self) -> Resources:
        """The part of the fair share beyond the deserved quota."""
        return minus(self.fair_share, self.deserved)


@dataclass(frozen=True, slots=True)
class FairShares:
    """Every queue's share of a capacity (``fair_shares``)."""

    capacity: Resources
    by_queue: Mapping[str, QueueShare]

    def __getitem__(self, name: str) -> QueueShare:
        return self.by_queue.get(name) or QueueShare(name, ZERO, ZERO, ZERO)


def _wants(tree: QueueTree, resource: str, demand: Mapping[str, Resources]) -> dict[str, int]:
    """Per queue, what it can take of ``resource``: leaves from demand, parents from their children.

    Children before parents, without recursion (``QueueTree.top_down`` reversed).
    """
    result: dict[str, int] = {}
    for name in reversed(tree.top_down()):
        queue = tree[name].of(resource)
        if tree.is_leaf(name):
            wanted = amount(demand.get(name, ZERO), resource)
        else:
            wanted = 0
            for kid in tree.children[name]:
                kid_wants, kid_quota = result[kid], tree[kid].of(resource)
                wanted += kid_wants if kid_quota.over_quota_weight > 0 else min(kid_quota.quota, kid_wants)
        result[name] = wanted if queue.limit is None else min(wanted, queue.limit)
    return result


def fair_shares(
    tree: QueueTree,
    capacity: Resources,
    demand: Mapping[str, Resources],
    *,
    usage: UsageWeighting | None = None,
) -> FairShares:
    """Compute every queue's deserved quota and fair share of ``capacity``.

    Args:
        tree: the validated queues.
        capacity: what the cluster can hold (allocatable of the schedulable nodes).
        demand: per leaf queue, what its workloads ask for: held by running ones plus wanted by pending
            ones. Missing queues ask for nothing.
        usage: optional time-based weighting (off by default).

    Raises:
        ValueError: ``demand`` names a queue that is unknown or not a leaf, or has a negative amount.
    """
    for name, wanted in sorted(demand.items()):
        if name not in tree or not tree.is_leaf(name):
            msg = f"demand for queue {name}, which is not a leaf queue"
            raise ValueError(msg)
        if any(amount(wanted, r) < 0 for r in RESOURCE_NAMES):
            msg = f"demand for queue {name} is negative: {wanted}"
            raise ValueError(msg)
    splits: dict[str, dict[str, Split]] = {name: {} for name in tree.queues}
    wants_by_resource = {r: _wants(tree, r, demand) for r in RESOURCE_NAMES}
    for resource in RESOURCE_NAMES:
        wants = wants_by_resource[resource]
        levels: list[tuple[int, tuple[str, ...]]] = [(amount(capacity, resource), tree.roots)]
        while levels:
            level_capacity, names = levels.pop()
            claims = [
                Claim(n, tree[n].of(resource).quota, tree[n].of(resource).over_quota_weight, wants[n])
                for n in names
            ]
            for name, split in divide(level_capacity, claims, usage=usage).items():
                splits[name][resource] = split
                if tree.children[name]:
                    levels.append((split.fair_share, tree.children[name]))
    by_queue = {
        name: QueueShare(
            name,
            resources_of({r: wants_by_resource[r][name] for r in RESOURCE_NAMES}),
            resources_of({r: parts[r].deserved for r in RESOURCE_NAMES}),
            resources_of({r: parts[r].fair_share for r in RESOURCE_NAMES}),
        )
        for name, parts in splits.items()
    }
    return FairShares(capacity, MappingProxyType(by_queue))
