"""Whether this extender is on duty: its kube-scheduler is the one scheduling, so it may act on its own.

kube-scheduler replicas elect a leader with their own Lease; only the leader schedules, so only the
extender beside it is called. The extender beside a standby keeps its caches warm and answers if asked,
but must never act on its own: its gang recovery would otherwise complete or roll back the gangs the
leader's extender is binding at that moment (it cannot tell them from gangs a crash left half-bound,
since they are not in its own barrier). The sign of duty is the only one that needs no knowledge of
kube-scheduler's identity (the two processes of a pod share a hostname, but so do two local ones): a
verb call within the last ``window`` seconds.

Off duty -> on duty (the first call after a quiet ``window``, e.g. just after this pair became the
leader): ``on_duty`` runs (the recovery of gangs a dead extender left half-bound) *before* that call is
answered, so no filter plans around a stale half-bound gang. Only one caller runs it; the others wait
for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Duty:
    """Tracks the calls of this extender's kube-scheduler (see the module docstring)."""

    def __init__(
        self, *, clock: Callable[[], float], window: float, on_duty: Callable[[], None] = lambda: None
    ) -> None:
        self._clock = clock
        self._window = window
        self._on_duty = on_duty
        self._last: float | None = None
        self._lock = threading.Lock()

    def on(self) -> bool:
        """Whether kube-scheduler called within the window (a loop that acts alone asks this first)."""
        last = self._last
        return last is not None and self._clock() - last < self._window

    def called(self) -> None:
        """Note a verb call; the first after a quiet window runs ``on_duty`` before returning."""
        if self.on():
            self._last = self._clock()
            return
        with self._lock:  # one caller recovers; the calls behind it wait, then find it on duty
            if not self.on():
                log.info("on duty: kube-scheduler calls this extender; recovering half-bound gangs first")
                try:
                    self._on_duty()
                except Exception:  # a failed recovery must not fail the call; the loop tries again
                    log.exception("recovery on taking duty failed")
            self._last = self._clock()
