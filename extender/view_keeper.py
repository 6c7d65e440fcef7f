"""Keeps the queue view fresh for the extender, and the groups admitted since it was built.

Building the queues' view walks every pod, so it is rebuilt in a background thread (at most every
``interval`` seconds, and only when the cluster changed); a decision reads the latest view, which is at
most that old. The corrections for that lag are the core's (``scheduling.queue_gate``); this module
only holds the two values they need, each swapped atomically: the view and the ``AdmittedBook``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from scheduling.model import Pod
from scheduling.promises import PromiseBook
from scheduling.queue_gate import AdmittedBook, AdmittedGroup
from scheduling.queue_view import QueueView, view_of
from scheduling.snapshot import ClusterSnapshot

log = logging.getLogger(__name__)


class ViewKeeper:
    """The latest queue view and the admitted-groups book."""

    def __init__(self, snapshot: Callable[[], ClusterSnapshot], promises: Callable[[], PromiseBook]) -> None:
        self._snapshot = snapshot
        self._promises = promises
        self._view: QueueView | None = None
        self._lock = threading.Lock()
        self._admitted = AdmittedBook()
        self._admitted_lock = threading.Lock()

    @property
    def view(self) -> QueueView | None:
        """The latest view, or ``None`` before the first build."""
        return self._view

    @property
    def admitted(self) -> AdmittedBook:
        """Groups admitted since the view was built (an immutable value)."""
        return self._admitted

    def refresh(self) -> QueueView:
        """Build the view now."""
        with self._lock:
            previous = self._view.tree if self._view is not None else None
            view = view_of(self._snapshot(), self._promises(), previous)
            if view.problems and (self._view is None or self._view.problems != view.problems):
                log.warning("queues are invalid, keeping the last valid set: %s", "; ".join(view.problems))
            self._view = view
            return view

    def _stale(self, snapshot: ClusterSnapshot) -> bool:
        view = self._view
        return view is None or view.source is None or view.source[0].version != snapshot.version

    def run(self, stop: threading.Event, interval: float) -> None:
        """Refresh whenever the cluster changed, at most every ``interval`` seconds."""
        while not stop.wait(interval):
            if self._stale(self._snapshot()):
                try:
                    self.refresh()
                except Exception:  # a bad object must not stop queue decisions for good
                    log.exception("could not rebuild the queue view")

    def view_for(self, pod: Pod, snapshot: ClusterSnapshot) -> QueueView | None:
        """The view to decide ``pod`` with: rebuilt first if it lags and does not know the pod's queue.

        kube-scheduler does not watch Queues, so a stale "queue does not exist" would park a pod whose
        Queue was created a moment ago until its next retry.
        """
        view = self._view
        if view is not None and not view.knows_queue_of(pod) and self._stale(snapshot):
            view = self.refresh()
        return view

    def record(self, admitted: tuple[str, AdmittedGroup] | None, now: float) -> None:
        """Count a group the gate let through until the view counts it (entries past use are dropped)."""
        if admitted is None:
            return
        view = self._view
        counted = view.counted if view is not None else frozenset()
        with self._admitted_lock:
            self._admitted = self._admitted.live(now, counted).with_group(*admitted)
