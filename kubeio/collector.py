"""Python's cyclic garbage collector kept out of decisions: survivors frozen, a full collection now and then.

Why: a full collection walks every object the collector tracks, and a placement manager keeps tens of
thousands of them (pods, snapshots, queue views). Whenever the collector's own thresholds started one
during a release pass, that pass took 100-150 ms more: at 1,000 nodes and 1,000 gated pods
(``hack/bench_release.py``, both ways in one run) the pass p99 was 219 ms with the collector as it
comes and 62-67 ms with the survivors frozen after each pass, or with the collector off.

What the process keeps is immutable values without reference cycles (frozen dataclasses, tuples,
persistent maps): reference counting frees them as soon as nothing holds them, frozen or not, and the
cyclic collector only rescans them. So after each pass the objects that survived it are frozen
(``gc.freeze``: moved to the permanent generation, which collections skip), and the collections the
thresholds start walk only what was allocated since. Garbage in a reference cycle that was frozen (an
exception kept with its traceback, say) is not freed by them: every ``full_every`` seconds, between
passes, the permanent generation is put back and collected once, so such garbage lives at most that
long, and that one slow collection falls between passes, where it delays no decision.

The extender settles after every watch event it applies (``kubeio.cluster_cache.ClusterCache``'s
``settle``). A write after a snapshot copies the state's per-node dicts (copy on write), so the young
generation held four dicts of 5,000 entries each, and the collection a decision's own allocations then
started walked them: at 5,000 nodes and 150,000 pods (``hack/perf/decision.py``) one decision in
forty took 1.2 ms more, one in a thousand 10 ms, and the decisive ``filter`` p99 was 0.81-1.28 ms;
with the survivors frozen after each event it was 0.21 ms, p50 unchanged. The extender has no gap
between passes, so its full collection (1.5 s at that size) stalls requests once every ``full_every``;
the collector as it comes makes the same full walk whenever a quarter more objects have survived since
its last one.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

FULL_EVERY = 300.0
"""Seconds between two full collections (of everything, the frozen objects included)."""


class Collector:
    """Freezes what survived a pass; now and then, between passes, collects everything once."""

    def __init__(self, clock: Callable[[], float], *, full_every: float = FULL_EVERY) -> None:
        """Start counting ``full_every`` from now on ``clock`` (monotonic seconds)."""
        self._clock = clock
        self._full_every = full_every
        self._last_full = clock()
        self._lock = threading.Lock()  # two loops settle; one full collection at a time is enough
        self.full_collections = 0

    def settle(self) -> None:
        """Call between passes: a full collection if one is due, then freeze every survivor."""
        with self._lock:
            now = self._clock()
            if now - self._last_full >= self._full_every:
                gc.unfreeze()
                gc.collect()
                self._last_full = now
                self.full_collections += 1
            gc.freeze()
