"""Kubernetes Events: the reasons written off the hot path, the actions written before they are taken.

``filter`` must not wait for the API server, yet every "no" must reach the user. Such events are queued
and written by one background thread (``record``). An action (an eviction, a resize, a move, a release,
a gang's recovery) is different: its event says why a user's pod was deleted or changed, and a queued
event lives only in this process's memory until the thread sends it, so a crash right after the action
would lose it for good. ``record_now`` writes the event before it returns; the driver calls it before
the action, so whatever the moment of a crash, the action is never without its event (a crash between
the two leaves the event, and the next leader, deciding again, takes the action). Either way the same
(object, reason, message) is written at most once per ``repeat_after`` seconds, so a gang re-filtered on
every cluster event does not flood the API.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from kubeio.errors import KubeError
from kubeio.http import KubeHttp

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an event is about."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class _Event:
    ref: ObjectRef
    type: str
    reason: str
    message: str


class EventRecorder:
    """Queues events and writes them from a daemon thread."""

    def __init__(
        self,
        http: KubeHttp,
        *,
        component: str = "phalanx",
        clock: Callable[[], float],
        repeat_after: float = 60.0,
        max_queue: int = 10_000,
    ) -> None:
        self._http = http
        self._component = component
        self._clock = clock
        self._repeat_after = repeat_after
        self._queue: queue.Queue[_Event] = queue.Queue(max_queue)
        self._last: dict[tuple[str, str, str], float] = {}
        self._trimmed = clock()
        self._lock = threading.Lock()

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue an event unless the same one was recorded within ``repeat_after`` seconds."""
        if not self._fresh(ref, reason, message):
            return
        try:
            self._queue.put_nowait(_Event(ref, type_, reason, message))
        except queue.Full:
            log.warning("event queue full; dropping %s %s: %s", reason, ref.name, message)

    def record_now(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Write an action's event before returning (unless written within ``repeat_after`` seconds).

        Call it before the action: the event then survives a crash at any moment after it. A write that
        fails is logged and the action goes ahead: an event is a report, never a condition of acting.
        """
        if self._fresh(ref, reason, message):
            self._write(_Event(ref, type_, reason, message))

    def _fresh(self, ref: ObjectRef, reason: str, message: str) -> bool:
        """Whether this event was not recorded within ``repeat_after`` seconds; remembers it if so."""
        key = (ref.uid or f"{ref.namespace}/{ref.name}", reason, message)
        now = self._clock()
        with self._lock:
            if now - self._last.get(key, float("-inf")) < self._repeat_after:
                return False
            self._last[key] = now
            if now - self._trimmed >= self._repeat_after:  # forget what can no longer repeat
                self._last = {k: t for k, t in self._last.items() if now - t < self._repeat_after}
                self._trimmed = now
        return True

    @property
    def remembered(self) -> int:
        """How many recent events are kept to suppress repeats: those of the last ``repeat_after`` seconds.

        Trimmed once per ``repeat_after``, so it follows the event rate, not the number of objects ever
        seen (a soak at 1,000 pods a minute records an event per pod).
        """
        return len(self._last)

    def run(self, stop: threading.Event) -> None:
        """Write queued events until ``stop`` is set."""
        while not stop.is_set():
            try:
                event = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            self._write(event)

    def start(self, stop: threading.Event) -> None:
        """Run the writer in a daemon thread."""
        threading.Thread(target=self.run, args=(stop,), name="events", daemon=True).start()

    def _write(self, event: _Event) -> None:
        now = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ref = event.ref
        # An event about a cluster-scoped object (a Node, a Queue) lives in "default", as client-go's
        # recorder puts it: there is no namespace "" to create it in.
        namespace = ref.namespace or "default"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ref.name}.", "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "apiVersion": ref.api_version,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": ref.uid,
            },
            "type": event.type,
            "reason": event.reason,
            "message": event.message[:1024],
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._http.request("POST", f"/api/v1/namespaces/{quote(namespace, safe='')}/events", body=body)
        except KubeError as exc:
            log.warning("could not record event %s on %s/%s: %s", event.reason, ref.namespace, ref.name, exc)
