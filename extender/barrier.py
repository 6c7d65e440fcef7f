"""The bind barrier: hold every member's bind until the gang is complete, then release them together.

kube-scheduler calls ``bind`` once per pod, each in its own goroutine, so a gang's binds arrive
concurrently on separate request threads (extender-protocol.md §2.8). A thread that joins waits until
``need`` members have joined (then all are released at once, and the one that completed the gang is
its leader), or until the barrier's deadline (then all fail together). A member that joins an open
barrier passes straight through.
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
    deadline: float
    state: State = State.WAITING
    arrived: list[str] = field(default_factory=list)
    leader: str | None = None
    plan_ok: bool | None = None
    inside: int = 0
    failures: int = 0


@dataclass(frozen=True, slots=True)
class Passage:
    """How one member left the barrier.

    Attributes:
        open: the gang is complete; the member may bind.
        leader: this member completed the gang and must write the plan before anyone binds.
        arrived: the members that had joined when the barrier opened or failed, in arrival order.
        rank: this member's position in ``arrived``.
        token: the barrier passed, to hand back to ``leave``.
    """

    open: bool
    leader: bool
    arrived: tuple[str, ...]
    rank: int
    token: object = field(compare=False, repr=False)


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

    def join(self, group: str, uid: str, need: int, timeout: float) -> Passage:
        """Wait until ``need`` members of ``group`` have joined, or the barrier's deadline passes."""
        with self._cond:
            barrier = self._barriers.get(group)
            if barrier is None or barrier.state is State.FAILED:
                barrier = _Barrier(need=max(1, need), deadline=self._clock() + timeout)
                self._barriers[group] = barrier
            barrier.inside += 1
            if uid not in barrier.arrived:
                barrier.arrived.append(uid)
            if barrier.state is State.WAITING and len(barrier.arrived) >= barrier.need:
                barrier.state = State.OPEN
                barrier.leader = uid
                self._cond.notify_all()
            while barrier.state is State.WAITING:
                left = barrier.deadline - self._clock()
                if left <= 0:
                    barrier.state = State.FAILED
                    self._cond.notify_all()
                    break
                self._cond.wait(min(left, 1.0))
            arrived = tuple(barrier.arrived)
            return Passage(
                barrier.state is State.OPEN, barrier.leader == uid, arrived, arrived.index(uid), barrier
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
        """A member is done with its barrier, ``bound`` or not.

        Returns:
            ``True`` for the last member out of an open barrier in which every member was bound: the
            gang is whole and its plan annotation can go.
        """
        barrier = _of(passage)
        with self._cond:
            barrier.inside -= 1
            if not bound:
                barrier.failures += 1
            if barrier.inside > 0:
                return False
            if self._barriers.get(group) is barrier:
                del self._barriers[group]
            return barrier.state is State.OPEN and barrier.failures == 0


def _of(passage: Passage) -> _Barrier:
    if not isinstance(passage.token, _Barrier):
        msg = "a Passage carries the barrier it came from"
        raise TypeError(msg)
    return passage.token
