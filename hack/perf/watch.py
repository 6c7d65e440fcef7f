"""A watch on one namespace's pods that records when each pod was first seen with a node.

Like ``workload.PodTimeline``, but it survives a broken or expired watch (it lists again and keeps
what it saw), because a benchmark watch runs for minutes on a busy API server, and it counts, so the
harness can wait for "all N bound" without polling the API server.
"""

from __future__ import annotations

import threading
import time

from kubeio.errors import KubeError
from kubeio.http import JsonObject, KubeHttp


class BindWatch:
    """Records ``bound_at[name]`` (``time.monotonic()``) the first time a pod shows ``spec.nodeName``.

    Use as a context manager; the watch is open when ``__enter__`` returns, so pods created afterwards
    are all seen. Pods already bound when it starts are recorded with the start time and flagged in
    ``bound_before_start``.
    """

    def __init__(self, http: KubeHttp, namespace: str) -> None:
        self.bound_at: dict[str, float] = {}
        self.bound_before_start: set[str] = set()
        self._http = http
        self._path = f"/api/v1/namespaces/{namespace}/pods"
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"watch-{namespace}", daemon=True)
        self.errors = 0

    def __enter__(self) -> BindWatch:
        self._thread.start()
        if not self._ready.wait(60):
            msg = f"could not list {self._path}"
            raise RuntimeError(msg)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(20)

    def wait_bound(self, names: set[str], timeout: float) -> bool:
        """Block until every pod in ``names`` has been seen bound, or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not names <= self.bound_at.keys():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 1.0))
        return True

    def _record(self, obj: JsonObject, now: float, *, listed: bool = False) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name and (obj.get("spec") or {}).get("nodeName") and name not in self.bound_at:
            with self._changed:
                self.bound_at[name] = now
                if listed:
                    self.bound_before_start.add(name)
                self._changed.notify_all()

    def _list(self) -> str:
        reply = self._http.request("GET", self._path, timeout=120.0)
        now = time.monotonic()
        for item in reply.get("items") or []:
            self._record(item, now, listed=not self._ready.is_set())
        return str((reply.get("metadata") or {}).get("resourceVersion", ""))

    def _run(self) -> None:
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list()
                    self._ready.set()
                query = {"resourceVersion": version, "timeoutSeconds": "30", "allowWatchBookmarks": "true"}
                for event in self._http.watch(self._path, query, timeout=60):
                    now = time.monotonic()
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":  # e.g. 410 Gone: list again
                        version = ""
                        break
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._record(obj, now)
                    if self._stop.is_set():
                        return
            except KubeError:
                self.errors += 1
                version = ""
                time.sleep(0.5)
