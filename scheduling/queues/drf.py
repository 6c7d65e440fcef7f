"""Dominant resource share (DRF): how big a queue is, measured by the resource it uses most of.

A queue that holds 50% of the GPUs but 1% of the CPU is as big as one that holds 50% of the CPU: what
counts is the scarcest resource it takes from everyone else (Ghodsi et al., as used by KAI, Volcano and
YuniKorn, docs/design/anchors.md §3.1, §3.2). Queue order uses it after quota and fair share, so between
queues in the same standing the one with the smaller dominant share goes first. Shares are exact fractions, so
ties are real ties and fall through to age and name.
"""

from __future__ import annotations

from fractions import Fraction

from scheduling.model import Resources
from scheduling.resources import RESOURCE_NAMES, amount


def resource_shares(allocated: Resources, capacity: Resources) -> dict[str, Fraction]:
    """Per resource, ``allocated / capacity``; a resource the cluster has none of counts only if used.

    A used resource with zero capacity has share 1 (the queue holds all there is to hold), an unused one 0.

    >>> shares = resource_shares(Resources(milli_cpu=8000, gpus=4), Resources(64000, 2**40, 16))
    >>> shares["nvidia.com/gpu"], shares["cpu"]
    (Fraction(1, 4), Fraction(1, 8))
    """
    result = {}
    for resource in RESOURCE_NAMES:
        used, whole = amount(allocated, resource), amount(capacity, resource)
        if whole > 0:
            result[resource] = Fraction(max(0, used), whole)
        else:
            result[resource] = Fraction(1 if used > 0 else 0)
    return result


def dominant_share(allocated: Resources, capacity: Resources) -> Fraction:
    """The largest of ``resource_shares``: the queue's dominant resource share, 0..1 (or more if over-full).

    >>> dominant_share(Resources(milli_cpu=8000, gpus=4), Resources(64000, 2**40, 16))
    Fraction(1, 4)
    """
    return max(resource_shares(allocated, capacity).values())


def dominant_resource(allocated: Resources, capacity: Resources) -> str:
    """The resource behind ``dominant_share`` (the first in ``RESOURCE_NAMES`` order on a tie)."""
    shares = resource_shares(allocated, capacity)
    return max(RESOURCE_NAMES, key=lambda r: (shares[r], -RESOURCE_NAMES.index(r)))
