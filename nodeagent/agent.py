"""The agent loop: read, publish when changed, wait; back off after failures; stop on request.

The agent must outlive everything a node throws at it: a driver that is not loaded yet, a GPU that falls
off the bus, an API server that restarts, RBAC that is not applied yet. Exiting would make the
DaemonSet crash-loop with growing restart delays and noisy events, while the fix (driver loaded, API
back) usually arrives on its own. So one cycle never raises: every failure is logged and the next cycle
comes after an exponential backoff; only the stop signal ends the loop.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kubeio.errors import KubeError
from nodeagent.nvml_reader import NvmlReading, ReadStatus
from nodeagent.publisher import PublishOutcome, TopologyPublisher


class Stopper(Protocol):
    """What the loop needs from its stop signal; ``threading.Event`` is one."""

    def is_set(self) -> bool:
        """Whether stopping was requested."""
        ...

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds; return ``True`` as soon as stopping is requested."""
        ...


class CycleOutcome(enum.Enum):
    """What one cycle did."""

    PUBLISHED = "published"
    """The annotation was written."""
    UNCHANGED = "unchanged"
    """The node already had this topology."""
    NOTHING_TO_PUBLISH = "nothing_to_publish"
    """NVML works and reports no GPU; the annotation is left as it is."""
    FAILED = "failed"
    """NVML or the API failed; the next cycle comes after a backoff."""


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits after consecutive failures: ``initial``, doubling, never more than ``maximum`` seconds."""

    initial: float
    maximum: float

    def delay(self, failures: int) -> float:
        """The wait after ``failures`` consecutive failed cycles (``failures >= 1``).

        >>> [Backoff(5, 60).delay(n) for n in (1, 2, 3, 4, 5)]
        [5.0, 10.0, 20.0, 40.0, 60]
        """
        doublings = min(max(failures - 1, 0), 32)
        return min(self.initial * float(1 << doublings), self.maximum)


class NodeAgent:
    """Runs read-and-publish cycles until stopped."""

    def __init__(
        self,
        read: Callable[[], NvmlReading],
        publisher: TopologyPublisher,
        *,
        interval: float,
        backoff: Backoff,
        log: logging.Logger | None = None,
    ) -> None:
        self._read = read
        self._publisher = publisher
        self._interval = interval
        self._backoff = backoff
        self._log = log or logging.getLogger(__name__)

    def run_once(self) -> CycleOutcome:
        """Read the topology and publish it if it changed. Never raises ``Exception``."""
        try:
            reading = self._read()
        except Exception:
            self._log.exception("reading the GPU topology failed unexpectedly")
            return CycleOutcome.FAILED
        if reading.status is ReadStatus.NO_GPUS:
            return CycleOutcome.NOTHING_TO_PUBLISH
        if reading.document is None:
            return CycleOutcome.FAILED  # the reader logged why
        if reading.status is ReadStatus.PARTIAL:
            self._log.warning("publishing a partial topology: %s", reading.detail)
        try:
            outcome = self._publisher.publish(reading.document)
        except KubeError as exc:
            self._log.warning("could not publish the topology of node %s: %s", self._publisher.node, exc)
            return CycleOutcome.FAILED
        except Exception:
            self._log.exception("publishing to node %s failed unexpectedly", self._publisher.node)
            return CycleOutcome.FAILED
        return CycleOutcome.PUBLISHED if outcome is PublishOutcome.PATCHED else CycleOutcome.UNCHANGED

    def run(self, stop: Stopper) -> None:
        """Cycle until ``stop`` is set: the interval after a good cycle, the backoff after a failed one."""
        failures = 0
        self._log.info(
            "node agent started for node %s: every %ss", self._publisher.node, _seconds(self._interval)
        )
        while not stop.is_set():
            outcome = self.run_once()
            failures = failures + 1 if outcome is CycleOutcome.FAILED else 0
            delay = self._backoff.delay(failures) if failures else self._interval
            if failures:
                self._log.info("failed cycle %d in a row; next attempt in %ss", failures, _seconds(delay))
            if stop.wait(delay):
                break
        self._log.info("node agent for node %s stopped", self._publisher.node)


def _seconds(value: float) -> str:
    return f"{value:g}"
