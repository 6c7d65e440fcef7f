"""The last filter decisions that turned a pod down, each with everything it read, to save and replay.

"Why is my pod pending?" is the question a saved decision answers, so only decisions that left a pod
with no node are kept: a backlog of pods that fit costs nothing here. Holding a decision costs only
references: its snapshot, promise book and queue view are immutable values the extender had anyway,
but each pins the version it read, so the log keeps the newest decision per pod for at most ``size``
pods, and forgets a pod once a later decision found it a node.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from scheduling.session import FilterInput, FilterOutcome


class DecisionLog:
    """Newest filter decision per pod key, bounded."""

    def __init__(self, size: int = 128) -> None:
        self._size = size
        self._last: OrderedDict[str, tuple[FilterInput, FilterOutcome]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, asked: FilterInput, outcome: FilterOutcome) -> None:
        """Keep this decision as ``asked.pod``'s newest if it turned the pod down, else forget the pod."""
        key = asked.pod.key
        if outcome.feasible:
            if key in self._last:
                with self._lock:
                    self._last.pop(key, None)
            return
        with self._lock:
            self._last[key] = (asked, outcome)
            self._last.move_to_end(key)
            while len(self._last) > self._size:
                self._last.popitem(last=False)

    def last(self, pod_key: str) -> tuple[FilterInput, FilterOutcome] | None:
        """The newest decision for ``namespace/name``, if it is still kept."""
        with self._lock:
            return self._last.get(pod_key)
