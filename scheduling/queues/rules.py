"""Whether a pending group may start now, by its queue's rules, with a sentence saying which rule holds it.

Rules (docs/design/queues.md §4), checked in this order:

1. **Limit.** The queue, and every ancestor, stays within its ``limit`` with the group.
2. **Non-preemptible within quota.** A non-preemptible group (PriorityClass value >= 100 unless labelled
   otherwise) runs only within its queue's quota: what non-preemptible work of the queue holds plus the
   group stays within the quota, on the resources quotas govern. Such work can never be taken back, so
   it must never be borrowed capacity.
3. **Groups ahead keep their room.** A group does not take free capacity that the groups ahead of it in
   ``order_pending`` still need: if it would fit the free capacity alone but not once the groups ahead
   have theirs, it waits.

The reason names the queue and the rule in plain words, e.g. "queue team-a: over its GPU limit (limit
16, allocated 12, this job needs 8)", and goes on the pod's ``FailedScheduling`` event unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from scheduling.model import Resources
from scheduling.queues.ordering import QueueState
from scheduling.queues.workloads import PendingGroup
from scheduling.resources import RESOURCE_NAMES, amount, format_amount, format_quantity, plus, total
from scheduling.resources import resource_label as label

_LISTED = 3


class QueueRule(enum.Enum):
    """Stable names of the rules that can hold a group, for metrics and events."""

    LIMIT = "limit"
    NON_PREEMPTIBLE_QUOTA = "non_preemptible_quota"
    HELD_FOR_AHEAD = "held_for_ahead"


@dataclass(frozen=True, slots=True)
class RuleCheck:
    """The answer for one group.

    Attributes:
        ok: the group may be placed now (placement may still find no node).
        reason: one sentence naming the queue and the rule; says "admitted" when ``ok``.
        rule: the rule that holds the group, or ``None`` when ``ok``.
        ahead: for ``HELD_FOR_AHEAD``, the keys of the groups ahead whose room it would take, in order.
    """

    ok: bool
    reason: str
    rule: QueueRule | None = None
    ahead: tuple[str, ...] = ()


def _over_limit(group: PendingGroup, state: QueueState) -> RuleCheck | None:
    for queue in state.path():
        for resource in RESOURCE_NAMES:
            limit = queue.limits.get(resource)
            held, need = amount(queue.allocated, resource), amount(group.requests, resource)
            if limit is None or need == 0 or held + need <= limit:
                continue
            whose = "its" if queue is state else f"its parent {queue.name}'s"
            numbers = (
                f"limit {format_amount(resource, limit)}, allocated {format_amount(resource, held)}, "
                f"this job needs {format_amount(resource, need)}"
            )
            reason = f"queue {state.name}: over {whose} {label(resource)} limit ({numbers})"
            return RuleCheck(False, reason, QueueRule.LIMIT)
    return None


def _over_quota(group: PendingGroup, state: QueueState) -> RuleCheck | None:
    if group.preemptible:
        return None
    for resource in state.quota_resources:
        quota = amount(state.quota, resource)
        held = amount(state.allocated_non_preemptible, resource)
        need = amount(group.requests, resource)
        if need and held + need > quota:
            reason = (
                f"queue {state.name}: non-preemptible jobs run only within the queue's quota "
                f"({label(resource)} quota {format_amount(resource, quota)}, "
                f"{format_amount(resource, held)} held by non-preemptible jobs, "
                f"this job needs {format_amount(resource, need)})"
            )
            return RuleCheck(False, reason, QueueRule.NON_PREEMPTIBLE_QUOTA)
    return None


def _held_for_ahead(group: PendingGroup, ahead: Sequence[PendingGroup], free: Resources) -> RuleCheck | None:
    if not ahead:
        return None
    needed_ahead = total(g.requests for g in ahead)
    with_ahead = plus(needed_ahead, group.requests)
    for resource in RESOURCE_NAMES:
        need, spare = amount(group.requests, resource), amount(free, resource)
        if need == 0 or need > spare:
            continue
        if amount(with_ahead, resource) > spare:
            holders = [g for g in ahead if amount(g.requests, resource)]
            names = ", ".join(f"{g.key} of queue {g.queue}" for g in holders[:_LISTED])
            if len(holders) > _LISTED:
                names += f" and {len(holders) - _LISTED} more"
            reason = (
                f"queue {group.queue}: the {format_quantity(resource, spare)} free are needed by "
                f"{len(holders)} group(s) ahead of this one ({names} need "
                f"{format_amount(resource, amount(needed_ahead, resource))}); "
                f"this job needs {format_amount(resource, need)}"
            )
            return RuleCheck(False, reason, QueueRule.HELD_FOR_AHEAD, tuple(g.key for g in holders))
    return None


def check_rules(
    group: PendingGroup,
    state: QueueState,
    ahead: Sequence[PendingGroup] = (),
    *,
    free: Resources | None = None,
) -> RuleCheck:
    """Decide whether ``group`` may start now by its queue's rules (see the module rules).

    Args:
        group: the group being decided.
        state: its leaf queue's state (``queue_states``), with the parents linked.
        ahead: the groups before it in ``order_pending`` that are admitted but not yet placed.
        free: the cluster's free capacity (unallocated and not promised); the "ahead" rule is skipped
            without it.

    Raises:
        ValueError: ``state`` is not the group's queue.
    """
    if state.name != group.queue:
        msg = f"group {group.key} is in queue {group.queue}, not {state.name}"
        raise ValueError(msg)
    held = _over_limit(group, state) or _over_quota(group, state)
    if held is None and free is not None:
        held = _held_for_ahead(group, ahead, free)
    return held or RuleCheck(True, f"queue {group.queue}: admitted")
