"""The last filter decisions, each with everything it read, so that one can be saved and replayed.

Holding a decision costs only references: its snapshot, promise book and queue view are immutable
values the extender had anyway. The log keeps the newest decision per pod, for at most ``size`` pods.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from scheduling.session import FilterInput, FilterOutcome


class DecisionLog:
    """Newest filter decision per pod key, bounded."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._last: OrderedDict[str, tuple[FilterInput, FilterOutcome]] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, asked: FilterInput, outcome: FilterOutcome) -> None:
        """Keep this decision as ``asked.pod``'s newest."""
        with self._lock:
            self._last[asked.pod.key] = (asked, outcome)
            self._last.move_to_end(asked.pod.key)
            while len(self._last) > self._size:
                self._last.popitem(last=False)

    def last(self, pod_key: str) -> tuple[FilterInput, FilterOutcome] | None:
        """The newest decision for ``namespace/name``, if it is still kept."""
        with self._lock:
            return self._last.get(pod_key)
