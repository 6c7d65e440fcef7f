"""The queue view the placement manager's passes share: built once per cluster version, not once per pass.

The queue pass (status, reclaim) and the release pass (admission gates) both read the queues' view of
the same cache, and the elastic pass reads the queue pass's. The view depends only on nodes, pods and
Queue specs, each of which moves the cache's version, so a view built for that version is the view of
every snapshot with it. A newer version is counted from the last one (``scheduling.queues.tally``): a
release pass runs several times a second on a busy cluster, and walking every running pod for each
(15,000 of them: about 0.1 s) was most of the pass, while only the pods that changed need counting.
"""

from __future__ import annotations

import threading

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.queues.tally import QueueTally
from scheduling.queues.view import QueueView


class SharedView:
    """The latest queue view, rebuilt only when the cluster's version moved (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._view: QueueView | None = None
        self._version: int | None = None
        self._tally = QueueTally()

    def of(self, snapshot: ClusterSnapshot) -> QueueView:
        """The view of ``snapshot`` (no promises: the placement manager makes none)."""
        with self._lock:
            if self._view is not None and self._version == snapshot.version:
                return self._view
            self._view = self._tally.view(snapshot)
            self._version = snapshot.version
            return self._view
