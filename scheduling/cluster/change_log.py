"""What changed between two versions of the cluster state, for indexes kept up to date per change.

``scheduling.cluster.state.ClusterState`` keeps two such logs. One notes the name of every node whose
object, usage or free GPUs it rewrites, with the version that change creates; a reader that built
something from the snapshot of version ``a`` brings it to version ``b`` by looking again at the nodes
changed in between, instead of at every node (``scheduling.nodes.rank_index``,
``scheduling.cluster.statement.carry``). The other notes the UID of every pod of the queues
(``Pod.in_queues``) added, changed or removed, so the queue view counts again only those
(``scheduling.queues.tally``). A log keeps its newest entries only: asked about a span it no longer
covers, it says so (``None``), and the reader rebuilds. Entries are only ever appended (the list is
replaced, never edited, when trimmed), so a snapshot's answer for spans up to its own version does not
change after it was taken.
"""

from __future__ import annotations

import bisect
import sys
import threading

KEEP = 8192
"""Entries kept after a trim; a reader more than this many changes behind rebuilds."""


class ChangeLog:
    """An append-only log of (version, name), trimmed to its newest ``keep`` entries."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._versions: list[int] = []
        self._names: list[str] = []
        self._floor = 0
        """No entry at or below this version is kept: spans starting below it are not covered."""
        self._lock = threading.Lock()

    def note(self, version: int, name: str) -> None:
        """``name`` changed, creating ``version`` (versions never decrease)."""
        with self._lock:
            self._versions.append(version)
            self._names.append(sys.intern(name))  # one string per name, not a copy per event
            if len(self._versions) > 2 * self._keep:
                cut = len(self._versions) - self._keep
                self._floor = self._versions[cut - 1]
                self._versions, self._names = self._versions[cut:], self._names[cut:]

    def everything(self, version: int) -> None:
        """Everything may have changed at ``version`` (a list replaced it): no earlier span is covered."""
        with self._lock:
            self._versions, self._names, self._floor = [], [], version

    def since(self, after: int, upto: int) -> frozenset[str] | None:
        """The names changed by versions ``after + 1 .. upto``, or ``None`` when the log no longer knows."""
        with self._lock:
            versions, names, floor = self._versions, self._names, self._floor
        if after < floor:
            return None
        start = bisect.bisect_right(versions, after)
        stop = bisect.bisect_right(versions, upto, lo=start)
        return frozenset(names[start:stop])
