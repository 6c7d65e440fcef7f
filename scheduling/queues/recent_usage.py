"""Time-based fair share: a queue that used a lot lately gets a smaller slice of the unused capacity.

This is KAI's time-based fairshare as docs/design/anchors.md §3.1 describes it (docs/time-based-fairshare, the
``resource_division`` weights): historical usage decays with a half-life, ``U = sum(0.5^(age/t_half) * A)``,
and is normalised by what the cluster could have delivered (capacity x window). When the over-quota rest
is split, each unsatisfied queue's weight is first normalised among its siblings (``w~ = w / sum w``)
and then moved by ``k`` times the gap between what it deserves and what it used:
``share_weight = max(0, w~ + k * (w~ - u))``. With ``u = 0`` (or no weighting at all, the default) this
is the plain ``rest x w / sum w``. Usage only moves the over-quota part; quotas stay guaranteed.

Everything here is a function of its arguments: ``now``, the half-life and the samples are passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType

_EMPTY: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class UsageSample:
    """Resource-seconds a queue used in one interval (e.g. GPU-seconds), stamped with the interval's end.

    Attributes:
        at: when the interval ended, in the same seconds as ``now``.
        amount: resource-seconds used in the interval.
    """

    at: float
    amount: float


def decayed_usage(samples: Iterable[UsageSample], *, now: float, half_life_seconds: float) -> float:
    """Sum the samples, each halved for every ``half_life_seconds`` of age; samples after ``now`` count fully.

    >>> decayed_usage([UsageSample(0, 100), UsageSample(60, 100)], now=60, half_life_seconds=60)
    150.0

    Raises:
        ValueError: the half-life is not positive.
    """
    if half_life_seconds <= 0:
        msg = f"half_life_seconds must be positive, got {half_life_seconds}"
        raise ValueError(msg)
    return math.fsum(s.amount * math.pow(0.5, max(0.0, now - s.at) / half_life_seconds) for s in samples)


def normalized_usage(decayed: Mapping[str, float], *, capacity_seconds: float) -> Mapping[str, float]:
    """Turn each queue's decayed usage into a fraction of what the cluster could deliver (0..1).

    Args:
        decayed: per queue, the result of ``decayed_usage``.
        capacity_seconds: capacity times the window (e.g. 64 GPUs x one week, in GPU-seconds).

    Raises:
        ValueError: ``capacity_seconds`` is not positive.
    """
    if capacity_seconds <= 0:
        msg = f"capacity_seconds must be positive, got {capacity_seconds}"
        raise ValueError(msg)
    return MappingProxyType({q: min(1.0, max(0.0, u / capacity_seconds)) for q, u in sorted(decayed.items())})


@dataclass(frozen=True, slots=True)
class UsageWeighting:
    """Historical usage that moves the over-quota weights (off unless passed to ``fair_shares``).

    Attributes:
        usage: per queue, normalised historical usage in 0..1 (``normalized_usage``); missing is 0.
            It applies to every resource of the queue; a parent's entry is its whole subtree's usage.
        k: how strongly usage moves the weights (KAI's ``kValue``); 0 turns the effect off.
    """

    usage: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    k: float = 1.0

    def share_weights(self, weights: Mapping[str, Fraction]) -> dict[str, Fraction]:
        """Return ``max(0, w~ + k * (w~ - u))`` per queue, with ``w~`` the weight normalised over ``weights``.

        When every result is zero (all used far more than they deserve) the normalised weights are
        returned, so the rest is still handed out rather than left idle.
        """
        whole = sum(weights.values(), Fraction(0))
        if whole <= 0:
            return dict(weights)
        k = Fraction(self.k)
        normal = {q: w / whole for q, w in weights.items()}
        moved = {
            q: max(Fraction(0), w + k * (w - Fraction(self.usage.get(q, 0.0)))) for q, w in normal.items()
        }
        return moved if any(moved.values()) else normal
