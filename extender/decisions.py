"""The last filter decisions that turned a pod down, each with everything it read, to save and replay.

"Why is my pod pending?" is the question a saved decision answers, so only decisions that left a pod
with no node are kept: a backlog of pods that fit costs nothing here. Holding a decision costs only
references: its snapshot, promise book and queue view are immutable values the extender had anyway,
but each pins the version it read, and an old version holds every pod that existed then. So the log
keeps the newest decision per pod for at most ``size`` pods, forgets a pod once a later decision found
it a node, and, whenever it takes a new decision, drops those older than ``max_age`` seconds and those
of pods the new decision's snapshot no longer has (deleted: nobody asks why they wait). Without the
last two, a log that fills slowly (few pods turned down, as with admission gates) pins snapshots from
many minutes back, and the extender's memory grows with the pods created meanwhile.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from scheduling.session import FilterInput, FilterOutcome


class DecisionLog:
    """Newest filter decision per pod key, bounded."""

    def __init__(self, size: int = 128, *, max_age: float = 300.0) -> None:
        self._size = size
        self._max_age = max_age
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
            for old, (then, _) in list(self._last.items()):
                gone = asked.snapshot.pod(then.pod.namespace, then.pod.name) is None
                if gone or asked.now - then.now > self._max_age:
                    del self._last[old]

    def __len__(self) -> int:
        """How many decisions are kept."""
        with self._lock:
            return len(self._last)

    def last(self, pod_key: str) -> tuple[FilterInput, FilterOutcome] | None:
        """The newest decision for ``namespace/name``, if it is still kept."""
        with self._lock:
            return self._last.get(pod_key)
