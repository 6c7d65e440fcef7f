"""When phalanx writes an elastic MPIJob: only once its operator has caught up with the job's pods.

The MPI Operator (v0.7.0, as v0.8.0) enqueues every event on a job rate-limited, and the delay
doubles with each event until a sync of the job succeeds (5 ms x 2^events, up to 1,000 s). A sync
that updates the job's status fails when a write to the MPIJob lands while it runs (its update names
the version it read). After a burst of pod events, as when six workers start at once, that one failure
leaves the job unsynced for minutes: a shrink not done, preempted workers not re-created. It was seen
on the test bed: phalanx's resize landed in the same millisecond as such a sync, after 15 events,
and the job waited 164 s.

A sync updates the status only when the status it computes differs from the one recorded, and the
recorded status says whether one is due: the operator counts the running workers below
``Worker.replicas`` (``status.replicaStatuses.Worker.active``). While that count differs from what
the pods say, a status update is coming and phalanx defers its write (size, plan, samples, a move's
time) to a later pass: the write waits its turn. It defers at most ``LAG_WAIT`` seconds (a "hold" is
another thing, a size kept for waiting work: ``scheduling.elastic.size_hold``): an operator that never
catches up (not running, or stalled already) is not waited for longer, the write goes as it did
before, and the job is told its operator may be stalled (``WriteTurn.stall_note``).
"""

from __future__ import annotations

from dataclasses import dataclass

LAG_WAIT = 10.0
"""Seconds phalanx defers its writes to a job whose operator has not caught up with its pods."""


@dataclass(frozen=True, slots=True)
class OperatorCount:
    """The running workers of a job as its operator recorded them and as its pods are.

    Attributes:
        recorded: ``status.replicaStatuses.Worker.active``, or ``None`` when the operator has recorded
            no worker status yet: a new job, whose first sync fails early, after few events, if at all.
        actual: the workers in phase Running with a replica index below ``Worker.replicas``: what the
            operator's next sync counts.
    """

    recorded: int | None
    actual: int

    @property
    def lag(self) -> str | None:
        """Why the operator has a status update to make (``None`` when it has caught up)."""
        if self.recorded is not None and self.recorded != self.actual:
            return f"its operator counts {self.recorded} running worker(s) where {self.actual} run"
        return None


@dataclass(frozen=True, slots=True)
class WriteTurn:
    """Whether to write the job this pass.

    Attributes:
        write: write now.
        lagging_since: when the lag was first seen (to keep for the next pass), or ``None``.
        reason: why the write waits, or ``""``.
    """

    write: bool
    lagging_since: float | None
    reason: str = ""

    @property
    def overdue(self) -> bool:
        """The operator has lagged ``LAG_WAIT`` or more: the write goes anyway, and the job is told why."""
        return self.write and bool(self.reason)

    @property
    def stall_note(self) -> str:
        """The Warning the job gets once per lag that is overdue (the operator may be backing off)."""
        return (
            f"{self.reason}: the MPI Operator may be backing off from this job (after a failed sync it"
            " waits 5 ms x 2^n before the next, n the job's events since its last successful sync), so"
            " its workers may be neither created nor removed for minutes; restarting the operator ends"
            " such a wait"
        )


def write_turn(count: OperatorCount | None, lagging_since: float | None, now: float) -> WriteTurn:
    """Write now, or defer while the operator catches up (see the module docstring).

    Args:
        count: the job's running workers as recorded and as they are; ``None``: not known (write).
        lagging_since: when an earlier pass first saw the lag, if it did.
        now: the caller's clock, in the seconds of ``lagging_since``.
    """
    lag = None if count is None else count.lag
    if lag is None:
        return WriteTurn(write=True, lagging_since=None)
    since = now if lagging_since is None else lagging_since
    if now - since >= LAG_WAIT:
        return WriteTurn(
            write=True, lagging_since=since, reason=f"{lag} for {now - since:.0f}s; written anyway"
        )
    return WriteTurn(write=False, lagging_since=since, reason=f"{lag}; written once it has caught up")
