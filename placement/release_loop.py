"""When the release pass runs: soon after a pod changes, never back to back, and once in a while anyway.

The pass is driven by the cache's pod events rather than the reconcile interval, because every gated
pod waits for it: a pod created on an idle cluster should reach kube-scheduler within a fraction of a
second, not a pass interval later. A burst of changes (a gang of 64 created, a node's pods finishing)
is folded into one pass by a short debounce, and the pause after a pass grows with what deciding cost
(``busy_share``: deciding takes at most that share of a core, up to ``max_pause``), so a busy cluster,
whose decisions are long, does not keep one running without pause, while on an idle one (a decision of
milliseconds) a pod waits for little more than the debounce. The pause follows the decision's CPU time,
not the whole pass: ungating is waiting on the API server, and counting it made every GPU freed on a
busy cluster wait up to ``max_pause`` more before the pass that fills it (the soak's GPUs idle between a
pod ending and the next one bound). The backstop pass covers what no pod
event announces: a PodGroup or a Queue created, a node added, a release's in-flight time running out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from placement.release_pass import ReleasePass, ReleaseReport

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoopTiming:
    """Debounce after a change and longest wait without one (seconds); the share of time passes may take."""

    debounce: float = 0.05
    backstop: float = 2.0
    busy_share: float = 0.15
    max_pause: float = 0.5

    def pause(self, last_pass: float) -> float:
        """The least time from the end of a pass that decided for ``last_pass`` seconds to the next one.

        At most ``max_pause``: a pass over a big backlog can take a second on a busy machine, and gated
        pods must not wait several seconds more for the next one.

        >>> LoopTiming().pause(0.005), round(LoopTiming().pause(0.05), 2), LoopTiming().pause(1.2)
        (0.05, 0.28, 0.5)
        """
        return min(self.max_pause, max(self.debounce, last_pass * (1 - self.busy_share) / self.busy_share))


def run_release_loop(
    releaser: ReleasePass,
    wake: threading.Event,
    stop: threading.Event,
    *,
    leading: Callable[[], bool],
    clock: Callable[[], float],
    on_pass: Callable[[ReleaseReport, float], None],
    settle: Callable[[], None] = lambda: None,
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
        settle: called after every pass, outside its timing (``kubeio.collector.Collector.settle``).
        timing: the waits above.
    """
    last, cost = float("-inf"), 0.0
    while not stop.is_set():
        wake.wait(timing.backstop)
        if stop.is_set():
            return
        if not leading():
            wake.clear()
            continue
        stop.wait(max(timing.debounce, timing.pause(cost) - (clock() - last)))
        wake.clear()
        started = clock()
        try:
            outcome = releaser.run()
        except Exception:  # one bad pass must not end the loop; the next one reads fresh facts
            log.exception("release pass failed")
            outcome = None
        last = clock()
        if outcome is not None:
            cost = outcome.decide_seconds
            on_pass(outcome, last - started)
        else:
            cost = last - started
        settle()
