"""Why a pod or PodGroup is pending, in plain words, by the same rules the filter applies (``phalanx why``).

- ``core``: ``explain(snapshot, target, now=...)`` -> ``Explanation``;
- ``model``: the frozen records an explanation is made of;
- ``target``: ``Target`` (what is asked, parsed from ``NS/POD`` or ``podgroup/NAME``), ``ExplainError``;
- ``nodes``: every node's reason, kube-scheduler's own filters first, grouped;
- ``queue_place``: the group's place in the fair order and its queue's figures;
- ``waiting``: the cause of a wait; ``room``: which running groups' finishing makes room, and the plan.
"""

from scheduling.explain.core import explain
from scheduling.explain.explanation import (
    Cause,
    Explanation,
    GangCount,
    NodeGroup,
    PlacedPod,
    QueuePlace,
    ShareFigures,
    WhatIf,
)
from scheduling.explain.target import ExplainError, Target

__all__ = [
    "Cause",
    "ExplainError",
    "Explanation",
    "GangCount",
    "NodeGroup",
    "PlacedPod",
    "QueuePlace",
    "ShareFigures",
    "Target",
    "WhatIf",
    "explain",
]
