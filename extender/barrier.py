"""The bind barrier: hold every member's bind until the gang is complete, then release them together.

kube-scheduler calls ``bind`` once per pod, each in its own goroutine, so a gang's binds arrive
concurrently on separate request threads (docs/design/extender-protocol.md §2.8). A thread that joins waits
until ``need`` members have joined (then all are released at once, and the one that completed the gang is
its leader), or until its own wait is over. A member that joins an open barrier passes straight through.

A member whose wait is over while the gang still makes progress (a member it had not seen joined within
the last ``timeout`` seconds) leaves *parked*: its bind fails, kube-scheduler retries it later, and the
barrier remembers it as arrived. When the gang completes, the leader binds the remembered members that
are not inside (``Passage.absent``). Why: kube-scheduler retries its backlog round-robin, and with a
backlog longer than one bind wait the members of a big gang cannot all be inside at once (a soak saw
"only 63 of 64 members reached bind within 25s" 126 times, each time starting over). Only
a whole wait with no new member fails the barrier, and then all fail together as before.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field


class State(enum.Enum):
    """Where a barrier stands."""

    WAITING = "waiting"
    OPEN = "open"
    FAILED = "failed"


@dataclass
class _Barrier:
    need: int
    wait: float
    last_progress: float
    state: State = State.WAITING
    arrived: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    leader: str | None = None
    plan_ok: bool | None = None
    failures: int = 0

    def idle(self, now: float) -> bool:
        """No member it had not seen joined for a whole wait: the gang is not coming together."""
        return now - self.last_progress >= self.wait

    def stale(self, now: float) -> bool:
        """Parked with nobody inside for two waits: forgotten (the reservation lapses by its own expiry)."""
        return self.state is State.WAITING and not self.present and now - self.last_progress >= 2 * self.wait


@dataclass(frozen=True, slots=True)
class Passage:
    """How one member left the barrier.

    Attributes:
        open: the gang is complete; the member may bind.
        leader: this member completed the gang and must write the plan before anyone binds.
        arrived: the members that had joined when the barrier opened or failed, in arrival order.
        rank: this member's position in ``arrived``.
        token: the barrier passed, to hand back to ``leave``.
        parked: the member's wait is over but the gang still makes progress: it is remembered.
        absent: for the leader, the arrived members not inside, which it must bind itself.
    """

    open: bool
    leader: bool
    arrived: tuple[str, ...]
    rank: int
    token: object = field(compare=False, repr=False)
    parked: bool = False
    absent: tuple[str, ...] = ()


class BarrierBoard:
    """All barriers of one extender process, keyed by gang."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._barriers: dict[str, _Barrier] = {}

    def active(self, group: str) -> bool:
        """Whether members of ``group`` are inside a barrier now (recovery leaves such gangs alone)."""
        with self._cond:
            return group in self._barriers

    def inside(self, group: str) -> tuple[str, ...]:
        """The members of ``group`` waiting inside its barrier now."""
        with self._cond:
            barrier = self._barriers.get(group)
            return tuple(barrier.present) if barrier is not None else ()

    def join(
        self, group: str, uid: str, need: int, timeout: float, keep: Callable[[str], bool] | None = None
    ) -> Passage:
        """Wait until ``need`` members of ``group`` have arrived, or ``timeout`` seconds pass.

        ``keep`` says whether a remembered member (arrived, not inside) still counts: one whose pod or
        reservation is gone does not.
        """
        with self._cond:
            now = self._clock()
            for key in [k for k, b in self._barriers.items() if b.stale(now)]:
                del self._barriers[key]
            barrier = self._barriers.get(group)
            if barrier is None or barrier.state is State.FAILED:
                barrier = _Barrier(need=max(1, need), wait=timeout, last_progress=now)
                self._barriers[group] = barrier
            if keep is not None and barrier.state is State.WAITING:
                barrier.arrived = [u for u in barrier.arrived if u in barrier.present or keep(u)]
            barrier.present.append(uid)
            if uid not in barrier.arrived:
                barrier.arrived.append(uid)
                barrier.last_progress = now
            if barrier.state is State.WAITING and len(barrier.arrived) >= barrier.need:
                barrier.state = State.OPEN
                barrier.leader = uid
                self._cond.notify_all()
            parked, deadline = False, now + timeout
            while barrier.state is State.WAITING:
                now = self._clock()
                if now >= deadline:
                    if barrier.idle(now):
                        barrier.state = State.FAILED
                        self._cond.notify_all()
                    else:
                        parked = True
                    break
                self._cond.wait(min(deadline - now, 1.0))
            arrived = tuple(barrier.arrived)
            leader = barrier.state is State.OPEN and barrier.leader == uid
            absent = tuple(u for u in arrived if u not in barrier.present) if leader else ()
            return Passage(
                barrier.state is State.OPEN, leader, arrived, arrived.index(uid), barrier, parked, absent
            )

    def publish_plan(self, passage: Passage, ok: bool) -> None:
        """The leader reports whether the plan annotation was written; followers wait for this."""
        barrier = _of(passage)
        with self._cond:
            barrier.plan_ok = ok
            self._cond.notify_all()

    def await_plan(self, passage: Passage, timeout: float) -> bool:
        """Wait for the leader's ``publish_plan``; ``False`` if it failed or did not come in time."""
        barrier = _of(passage)
        deadline = self._clock() + timeout
        with self._cond:
            while barrier.plan_ok is None:
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 1.0))
            return barrier.plan_ok

    def leave(self, group: str, passage: Passage, *, bound: bool) -> bool:
        """A member is done with its barrier, ``bound`` or not (a parked member is not a failure).

        Returns:
            ``True`` for the last member out of an open barrier in which every member was bound: the
            gang is whole and its plan annotation can go.
        """
        barrier = _of(passage)
        with self._cond:
            barrier.present.remove(passage.arrived[passage.rank])
            if not bound and not passage.parked:
                barrier.failures += 1
            if barrier.present or barrier.state is State.WAITING:
                return False
            if self._barriers.get(group) is barrier:
                del self._barriers[group]
            return barrier.state is State.OPEN and barrier.failures == 0


def _of(passage: Passage) -> _Barrier:
    if not isinstance(passage.token, _Barrier):
        msg = "a Passage carries the barrier it came from"
        raise TypeError(msg)
    return passage.token
