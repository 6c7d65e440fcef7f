"""Workloads as queue decisions see them: a pending group waiting for room, a running gang that holds it.

A "group" is a PodGroup (gang) or a single pod: it is admitted, placed and evicted whole, so queue
decisions never look at pods. ``requests`` is what the whole group holds when running. Whether a
workload may be preempted follows KAI's rule (docs/design/anchors.md §3.1): PriorityClass value 100 or more is
non-preemptible, and a label can say otherwise either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.model import QUEUE_LABEL as QUEUE_LABEL  # a pod's label: the model's, named here too
from scheduling.model import Resources

PREEMPTIBLE_LABEL = "phalanx.io/preemptible"
"""Pod and PodGroup label overriding the priority rule: ``"true"`` or ``"false"``."""

NON_PREEMPTIBLE_PRIORITY = 100
"""PriorityClass value from which a workload is non-preemptible unless labelled otherwise."""


def is_preemptible(priority: int, label: str | None = None) -> bool:
    """Whether a workload may be preempted or reclaimed.

    Non-preemptible workloads run only within their queue's quota, so they never need to be taken back.

    >>> is_preemptible(0), is_preemptible(100), is_preemptible(100, "true"), is_preemptible(5, "false")
    (True, False, True, False)
    """
    if label is not None and label.strip().lower() in ("true", "false"):
        return label.strip().lower() == "true"
    return priority < NON_PREEMPTIBLE_PRIORITY


@dataclass(frozen=True, slots=True)
class PendingGroup:
    """A group waiting to be admitted.

    Attributes:
        key: ``namespace/name`` of the PodGroup (or of the pod, for a pod on its own).
        queue: the leaf queue it belongs to.
        requests: what the whole group needs (all of its ``minMember`` pods).
        priority: the PriorityClass value; higher goes first within a queue.
        created: creation timestamp as RFC 3339 text (sorts chronologically); older goes first.
        preemptible: see ``is_preemptible``; a non-preemptible group runs only within its queue's quota.
    """

    key: str
    queue: str
    requests: Resources
    priority: int = 0
    created: str = ""
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class RunningGang:
    """A group that holds resources now; reclaim evicts it whole or not at all.

    Attributes:
        key: ``namespace/name`` of the PodGroup (or pod).
        queue: the leaf queue it belongs to.
        requests: what the whole gang holds.
        preemptible: whether it may be evicted at all.
        priority: the PriorityClass value; lower is evicted first.
        started_at: when it started running, in the same seconds as ``now``; younger is evicted first,
            and a gang younger than its queue's minimum runtime is not evicted.
    """

    key: str
    queue: str
    requests: Resources
    preemptible: bool = True
    priority: int = 0
    started_at: float = 0.0
