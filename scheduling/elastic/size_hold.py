"""Decide the target once, move once: a job resized for waiting work keeps that size while the work waits.

Two elastic jobs that shrink for a waiting gang are seen at their new sizes a moment later, and what is
learned there (new samples, so new models) would divide the pool again while the gang still waits: one
job grows back, the other shrinks further (12 -> 4 -> 6 and 2 -> 8 -> 6 workers), and their workers
restart twice for one gang. So a job that a round resizes while groups wait *holds* its size until none
of those groups waits any more (each bound or gone) or ``hold_seconds`` have passed (a gang that never
binds must not freeze the jobs for ever). While it holds, the other jobs divide what is left of the
pool (``planner.plan_elastic``). A hold gives way when the pool cannot keep the held jobs at their sizes
(more work arrived): every job is then sized afresh, and each one resized holds again.

The drivers carry the holds from one round to the next (``ElasticDecision.holds`` into the next
``ElasticRound.holds``), in memory: a restarted placement manager starts with none, which costs a job at
most the one resize the hold would have spared it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SizeHold:
    """A job's size held for waiting work.

    Attributes:
        waiting: the waiting groups (keys) the job was resized for.
        since: when (seconds, the round's clock).
    """

    waiting: frozenset[str]
    since: float


def live_holds(
    holds: Mapping[str, SizeHold], waiting: Collection[str], now: float, hold_seconds: float
) -> dict[str, SizeHold]:
    """The holds still in force: one of their groups still waits, and ``hold_seconds`` have not passed."""
    still = frozenset(waiting)
    return {
        key: hold
        for key, hold in sorted(holds.items())
        if hold.waiting & still and now - hold.since < hold_seconds
    }


def next_holds(
    live: Mapping[str, SizeHold], resized: Iterable[str], waiting: Collection[str], now: float
) -> dict[str, SizeHold]:
    """The holds to carry on: ``live``, and one from ``now`` for each job resized while groups wait."""
    held = dict(live)
    if waiting:
        for key in resized:
            held[key] = SizeHold(frozenset(waiting), now)
    return dict(sorted(held.items()))
