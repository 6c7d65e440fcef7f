"""Who leads: the decision behind a ``coordination.k8s.io`` Lease, as client-go's leader election makes it.

Two replicas of the placement manager run; only the one holding the Lease may write anything, so every
eviction, resize, move and pin is made once. A candidate never compares the Lease's ``renewTime`` with
its own clock (the two machines' clocks may differ): like client-go, it notes *when it saw the record
change*, on its own monotonic clock, and takes the Lease over only once the record has stayed the same
for a whole ``leaseDurationSeconds`` since. A holder renews well before that; a holder that could not
renew for ``renew_deadline`` stops acting (its process exits and restarts as a candidate), which is
shorter than the duration, so two holders never act at once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The Lease as read.

    Attributes:
        holder: ``spec.holderIdentity`` (empty: released).
        duration_seconds: ``spec.leaseDurationSeconds``.
        transitions: ``spec.leaseTransitions``.
        version: ``metadata.resourceVersion``: a record that changed has another.
    """

    holder: str
    duration_seconds: int
    transitions: int
    version: str


@dataclass(frozen=True, slots=True)
class Sighting:
    """The record a candidate last saw and when it first saw that version (its monotonic clock)."""

    record: LeaseRecord | None
    since: float


class Step(enum.Enum):
    """What a candidate does next."""

    CREATE = "create"
    """No Lease exists: create it, holding it."""
    RENEW = "renew"
    """It holds the Lease: write a new ``renewTime``."""
    TAKE = "take"
    """The holder let it lapse (or released it): write itself as the holder."""
    WAIT = "wait"
    """Another holds it and renews it: stand by."""


def observe(previous: Sighting | None, record: LeaseRecord | None, now: float) -> Sighting:
    """The sighting after reading ``record`` at ``now``: ``since`` moves only when the record changed."""
    if previous is not None and previous.record == record:
        return previous
    return Sighting(record, now)


def next_step(me: str, sighting: Sighting, now: float) -> tuple[Step, str]:
    """What ``me`` does, and why in words (for the log).

    >>> rec = LeaseRecord("a", 15, 0, "7")
    >>> next_step("b", Sighting(rec, 100.0), 110.0)[0], next_step("b", Sighting(rec, 100.0), 115.5)[0]
    (<Step.WAIT: 'wait'>, <Step.TAKE: 'take'>)
    >>> next_step("a", Sighting(rec, 100.0), 200.0)[0]
    <Step.RENEW: 'renew'>
    """
    record = sighting.record
    if record is None:
        return Step.CREATE, "no Lease yet"
    if record.holder == me:
        return Step.RENEW, "holds the Lease"
    if not record.holder:
        return Step.TAKE, "the Lease was released"
    unchanged = now - sighting.since
    if unchanged >= record.duration_seconds:
        return Step.TAKE, f"{record.holder} has not renewed the Lease for {unchanged:.1f}s"
    return Step.WAIT, f"{record.holder} holds the Lease (renewed {unchanged:.1f}s ago or less)"
