"""Leader election of the placement manager: only the replica holding the Lease acts.

A thread reads the Lease every ``retry_seconds`` and does what ``scheduling.leadership.next_step``
says (create, renew, take over, or wait). The reconcile loop runs passes only while ``leading`` is set.
A leader that has not renewed for ``renew_deadline_seconds`` (API server unreachable, a long stall)
sets ``lost`` and stops leading for good: the process exits and its restart is a candidate again, as
kube-scheduler does, so a replica that may have been replaced never writes again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubeio.errors import KubeError
from kubeio.ports import LeaseStore
from scheduling.leadership import Sighting, Step, next_step, observe

log = logging.getLogger(__name__)


class Leadership:
    """Holds, renews and gives up the Lease (see the module docstring)."""

    def __init__(
        self,
        lease: LeaseStore,
        identity: str,
        *,
        duration_seconds: int,
        renew_deadline_seconds: float,
        retry_seconds: float,
        clock: Callable[[], float],
        on_change: Callable[[bool], None] = lambda _leading: None,
    ) -> None:
        self._lease = lease
        self.identity = identity
        self._duration = duration_seconds
        self._deadline = renew_deadline_seconds
        self._retry = retry_seconds
        self._clock = clock
        self._on_change = on_change
        self.leading = threading.Event()
        """Set while this replica holds the Lease and has renewed it within the deadline."""
        self.lost = threading.Event()
        """Set once a held Lease could not be renewed in time: this replica must not act again."""
        self._sighting: Sighting | None = None
        self._renewed = 0.0

    def step(self) -> None:
        """Read the Lease once and act on it (one tick of the thread; tests call it directly)."""
        now = self._clock()
        try:
            record = self._lease.read()
            self._sighting = observe(self._sighting, record, now)
            step, why = next_step(self.identity, self._sighting, now)
            if step is Step.WAIT:
                done = False
            elif step is Step.CREATE:
                done = self._lease.create(self.identity, self._duration)
            else:
                done = self._lease.write(self.identity, self._duration, taking=step is Step.TAKE)
        except KubeError as exc:
            step, why, done = Step.WAIT, f"the Lease could not be read or written: {exc}", False
        if done:
            self._renewed = now
            if not self.leading.is_set():
                log.info("%s leads now (%s)", self.identity, why)
                self.leading.set()
                self._on_change(True)
        elif self.leading.is_set() and now - self._renewed >= self._deadline:
            log.error(
                "%s lost the Lease: not renewed for %.1fs (%s); stopping",
                self.identity,
                now - self._renewed,
                why,
            )
            self.leading.clear()
            self.lost.set()
            self._on_change(False)

    def run(self, stop: threading.Event) -> None:
        """Tick until ``stop`` or ``lost``; at a clean stop, give the Lease up so a standby leads at once."""
        while not stop.is_set() and not self.lost.is_set():
            self.step()
            stop.wait(self._retry)
        if self.leading.is_set():
            self.leading.clear()
            try:
                self._lease.release(self.identity)
                log.info("%s released the Lease", self.identity)
            except KubeError as exc:
                log.warning("Lease not released (%s); a standby takes over when it lapses", exc)

    def start(self, stop: threading.Event) -> threading.Thread:
        """Run on a daemon thread."""
        thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        thread.start()
        return thread
