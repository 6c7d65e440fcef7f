"""A waiting group's place in the fair order and its queue's figures, from the queue view ``filter`` reads.

The fair order (``scheduling.queues.order_pending``) decides who goes next, so a user whose job waits
wants to see how many groups are ahead of it, where its queue stands against its quota and fair share,
and, when a queue rule holds it, that rule's sentence exactly as the filter gave it to kube-scheduler
(``scheduling.admission.queue_hold``'s answer, kept on the filter's outcome).
"""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.admission.queue_hold import HoldAnswer
from scheduling.explain.explanation import QueuePlace, ShareFigures
from scheduling.model import Pod
from scheduling.queues import DEFAULT_QUEUE, QUEUE_LABEL, QueueError, QueueState, Standing, standing
from scheduling.queues.lines import pending_group
from scheduling.queues.view import QueueView
from scheduling.resources import GPU, RESOURCE_NAMES, amount

KUEUE_SENTENCE = (
    "admitted by Kueue: its ClusterQueue holds the quota, and none of phalanx's queues counts it or holds it"
)
"""What a pod whose quota Kueue owns is told about queues."""

AHEAD_SHOWN = 5
"""How many groups from the head of the line are named."""

STANDINGS = {
    Standing.WITHIN_DESERVED: "within deserved quota",
    Standing.WITHIN_FAIR_SHARE: "within fair share",
    Standing.OVER_FAIR_SHARE: "over fair share",
}


def _figures(state: QueueState, requested: Sequence[int]) -> tuple[ShareFigures, ...]:
    shown = []
    for i, resource in enumerate(RESOURCE_NAMES):
        quota, limit = amount(state.quota, resource), state.limits.get(resource)
        if resource != GPU and not quota and limit is None:
            continue  # a resource this queue does not govern: its figures say nothing about the wait
        shown.append(
            ShareFigures(
                resource,
                quota,
                limit,
                amount(state.deserved, resource),
                amount(state.fair_share, resource),
                amount(state.allocated, resource),
                requested[i],
            )
        )
    return tuple(shown)


def queue_place(pod: Pod, members: Sequence[Pod], view: QueueView, hold: HoldAnswer | None) -> QueuePlace:
    """Where ``pod``'s group stands in ``view``, and what the queue hold said (``hold``; ``None``: not run).

    Args:
        pod: the pod the filter was asked about.
        members: its gang's members (``[pod]`` for a pod on its own).
        view: the queue view the filter read.
        hold: the hold's answer on the filter's outcome.
    """
    held, rule = (hold.held, hold.rule) if hold is not None else (None, None)
    if pod.quota_by_kueue or any(m.quota_by_kueue for m in members):  # Kueue's quota (docs/kueue.md)
        return QueuePlace("Kueue", None, len(view.pending), None, (), "", (), None, KUEUE_SENTENCE)
    try:
        group = pending_group(pod, members, view.tree)
    except QueueError as exc:
        named = pod.labels.get(QUEUE_LABEL) or DEFAULT_QUEUE
        return QueuePlace(named, None, len(view.pending), None, (), "", (), "unknown_queue", held or str(exc))
    state = view.states[group.queue]
    position = view.positions.get(group.key)
    before = view.pending[:position] if position is not None else ()
    requested = [amount(group.requests, r) for r in RESOURCE_NAMES]
    return QueuePlace(
        queue=group.queue,
        position=None if position is None else position + 1,
        pending=len(view.pending),
        in_queue=None if position is None else 1 + sum(1 for g in before if g.queue == group.queue),
        ahead=tuple(g.key for g in before[:AHEAD_SHOWN]),
        standing=STANDINGS[standing(state, group.requests)],
        shares=_figures(state, requested),
        rule=None if rule is None else rule.value,
        sentence=held or f"queue {group.queue}: admitted",
        holders=hold.ahead if hold is not None else (),
        problems=view.problems,
    )
