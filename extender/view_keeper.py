"""Keeps the queue view fresh for the extender, and the groups admitted since it was built.

The view is rebuilt in a background thread (at most every ``interval`` seconds, and only when the
cluster changed); a decision reads the latest view, which is at most that old. A rebuild counts only
the pods (and promises) that changed since the last (``scheduling.queues.tally``): walking every pod,
15,000 on a busy cluster, took about 0.1 s of the interpreter the extender's requests share. The
corrections for that lag are the core's (``scheduling.admission.queue_hold``); this module only holds
the values they need, each swapped atomically: the view, the ``AdmittedBook`` and the ``TriedBook``
(when kube-scheduler last tried each group).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from scheduling.admission.queue_hold import TRIED_FRESH, AdmittedBook, AdmittedGroup, TriedBook
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod
from scheduling.queues.tally import QueueTally
from scheduling.queues.view import QueueView
from scheduling.resources import within

log = logging.getLogger(__name__)

_TRIED_FLOOR = 1024


class ViewKeeper:
    """The latest queue view and the admitted-groups book."""

    def __init__(
        self,
        snapshot: Callable[[], ClusterSnapshot],
        promises: Callable[[], PromiseBook],
        *,
        on_release: Callable[[], None] = lambda: None,
        on_rebuild: Callable[[QueueView], None] = lambda view: None,
    ) -> None:
        """Keep the view of ``snapshot()`` after ``promises()``.

        ``on_release`` is called after a rebuild in which some queue holds less than before: a group
        that a queue rule held may now be admitted, but kube-scheduler does not watch Queues, so the
        nudger must wake it (a pod leaving wakes it too, but possibly before this view counted that).
        ``on_rebuild`` gets every new view (the nudger wakes groups held for groups no longer ahead).
        """
        self._snapshot = snapshot
        self._promises = promises
        self._on_release = on_release
        self._on_rebuild = on_rebuild
        self._view: QueueView | None = None
        self._tally = QueueTally()
        self._lock = threading.Lock()  # also serialises the tally, which is not thread-safe
        self._admitted = AdmittedBook()
        self._admitted_lock = threading.Lock()
        self._tried = TriedBook()
        self._tried_lock = threading.Lock()
        self._tried_limit = _TRIED_FLOOR

    @property
    def view(self) -> QueueView | None:
        """The latest view, or ``None`` before the first build."""
        return self._view

    @property
    def admitted(self) -> AdmittedBook:
        """Groups admitted since the view was built (an immutable value)."""
        return self._admitted

    @property
    def tried(self) -> TriedBook:
        """When kube-scheduler last tried each group (an immutable value)."""
        return self._tried

    def tried_now(self, key: str, now: float) -> None:
        """Kube-scheduler asked about group ``key`` at ``now``.

        Groups not tried for longer than they count are dropped whenever the book doubles, so its size
        follows the groups being tried, not every group ever seen (amortised O(1) per call).
        """
        with self._tried_lock:
            tried = self._tried.with_try(key, now)
            if len(tried.at) > self._tried_limit:
                tried = tried.pruned(now, TRIED_FRESH)
                self._tried_limit = max(_TRIED_FLOOR, 2 * len(tried.at))
            self._tried = tried

    def refresh(self) -> QueueView:
        """Build the view now."""
        with self._lock:
            view = self._tally.view(self._snapshot(), self._promises())
            if view.problems and (self._view is None or self._view.problems != view.problems):
                log.warning("queues set aside, every other queue in force: %s", "; ".join(view.problems))
            before, self._view = self._view, view
        with self._admitted_lock:  # what the new view counts counts no more here
            self._admitted = self._admitted.live(float("-inf"), view.counted)
        if before is not None and released(before, view):
            self._on_release()
        self._on_rebuild(view)
        return view

    def run(self, stop: threading.Event, interval: float) -> None:
        """Refresh whenever the cluster changed, at most every ``interval`` seconds."""
        while not stop.wait(interval):
            if self.lags(self._snapshot()):
                try:
                    self.refresh()
                except Exception:  # a bad object must not stop queue decisions for good
                    log.exception("could not rebuild the queue view")

    def lags(self, snapshot: ClusterSnapshot) -> bool:
        """Whether the view was built from an older cluster than ``snapshot`` (or not yet at all)."""
        view = self._view
        return view is None or view.source is None or view.source[0].version != snapshot.version

    def record(self, admitted: tuple[str, AdmittedGroup] | None, now: float) -> None:
        """Count a group the gate let through until the view counts it (entries past use are dropped)."""
        if admitted is None:
            return
        view = self._view
        counted = view.counted if view is not None else frozenset()
        with self._admitted_lock:
            self._admitted = self._admitted.live(now, counted).with_group(*admitted)

    def withdraw(self, key: str) -> None:
        """A decision found group ``key`` no node: an entry an earlier decision recorded holds nothing now."""
        with self._admitted_lock:
            self._admitted = self._admitted.without_group(key)

    def pod_changed(self, old: Pod | None, new: Pod | None) -> None:
        """Cache listener: a deleted pod that was admitted a moment ago holds nothing any more."""
        if new is None and old is not None:
            with self._admitted_lock:
                self._admitted = self._admitted.without_pod(old.uid)


def released(before: QueueView, after: QueueView) -> bool:
    """Whether some queue holds less in ``after`` than in ``before`` (on any resource)."""
    for name, state in after.states.items():
        old = before.states.get(name)
        if old is None:
            continue
        if not within(old.allocated, state.allocated):
            return True
    return False
