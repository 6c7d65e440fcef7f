"""When the release pass runs: soon after a pod changes, never back to back, and once in a while anyway.

The pass is driven by the cache's pod events rather than the reconcile interval, because every gated
pod waits for it: a pod created on an idle cluster should reach kube-scheduler within a fraction of a
second, not a pass interval later. A burst of changes (a gang of 64 created, a node's pods finishing)
is folded into one pass by a short debounce, and passes are at least ``min_gap`` apart so a busy
cluster does not keep the pass running without pause. The backstop pass covers what no pod event
announces: a PodGroup or a Queue created, a node added, a release's in-flight time running out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from placement.gates import GatePass, GateReleaser

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoopTiming:
    """Seconds: debounce after a change, least gap between passes, longest wait without a change."""

    debounce: float = 0.05
    min_gap: float = 0.5
    backstop: float = 2.0


def run_gate_loop(
    releaser: GateReleaser,
    wake: threading.Event,
    stop: threading.Event,
    *,
    leading: Callable[[], bool],
    clock: Callable[[], float],
    on_pass: Callable[[GatePass, float], None],
    timing: LoopTiming = LoopTiming(),
) -> None:
    """Run release passes until ``stop``: only while ``leading()``; a failed pass is logged, not fatal.

    Args:
        releaser: the pass.
        wake: set by the cache's pod listener; cleared before each pass.
        stop: ends the loop.
        leading: whether this replica holds the Lease now (a standby never releases).
        clock: monotonic seconds, for the gaps.
        on_pass: called with each pass's outcome and its duration (metrics, logs).
        timing: the waits above.
    """
    last = float("-inf")
    while not stop.is_set():
        wake.wait(timing.backstop)
        if stop.is_set():
            return
        if not leading():
            wake.clear()
            continue
        stop.wait(max(timing.debounce, timing.min_gap - (clock() - last)))
        wake.clear()
        started = clock()
        try:
            outcome = releaser.reconcile_once()
        except Exception:  # one bad pass must not end the loop; the next one reads fresh facts
            log.exception("release pass failed")
            outcome = None
        last = clock()
        if outcome is not None:
            on_pass(outcome, last - started)
