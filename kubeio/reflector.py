"""List-then-watch one API collection into a handler, and keep watching through failures.

This is client-go's reflector in miniature: list (paged) to get a consistent state and its
resourceVersion, then watch from that version with bookmarks; a 410 Gone or a broken stream relists or
re-watches after a capped backoff. The handler sees a full replacement after every list, so a cache
built on it recovers everything from the API server after any gap (the crash-safety rule).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeio.errors import GoneError, KubeError, NotFoundError
from kubeio.http import JsonObject, JsonRequester, KubeHttp

log = logging.getLogger(__name__)

ReplaceHandler = Callable[[list[JsonObject]], None]
EventHandler = Callable[[str, JsonObject], None]


@dataclass(frozen=True, slots=True)
class Collection:
    """What to list and watch.

    Attributes:
        path: the collection's URL path, e.g. ``/api/v1/pods``.
        field_selector: an optional field selector; objects leaving it arrive as DELETED events.
        page_size: items per list page, so a 150,000-pod list does not arrive as one reply.
        optional: the collection may not exist (a CRD not installed): treat it as empty and look again
            every ``optional_retry`` seconds, instead of never becoming synced.
    """

    path: str
    field_selector: str = ""
    page_size: int = 500
    optional: bool = False
    optional_retry: float = 30.0


def list_collection(http: JsonRequester, collection: Collection) -> tuple[list[JsonObject], str]:
    """List every object of ``collection``, page by page; return the items and the list's resourceVersion.

    Raises:
        KubeError: a page could not be read (``NotFoundError`` when the collection does not exist).
    """
    items: list[JsonObject] = []
    token = ""
    base = {"fieldSelector": collection.field_selector} if collection.field_selector else {}
    while True:
        query = {**base, "limit": str(collection.page_size)}
        if token:
            query["continue"] = token
        page = http.request("GET", collection.path, query=query, timeout=120.0)
        items.extend(page.get("items") or [])
        meta: Mapping[str, Any] = page.get("metadata") or {}
        token = str(meta.get("continue") or "")
        if not token:
            return items, str(meta.get("resourceVersion", ""))


class Reflector:
    """Keeps one handler in step with one collection until ``stop`` is set."""

    def __init__(
        self,
        http: KubeHttp,
        collection: Collection,
        *,
        on_replace: ReplaceHandler,
        on_event: EventHandler,
        stop: threading.Event,
        watch_seconds: int = 300,
        max_backoff: float = 10.0,
    ) -> None:
        self._http = http
        self._collection = collection
        self._on_replace = on_replace
        self._on_event = on_event
        self._stop = stop
        self._watch_seconds = watch_seconds
        self._max_backoff = max_backoff
        self.synced = threading.Event()
        """Set once the first full list has been handed to ``on_replace``."""

    def _query(self) -> dict[str, str]:
        query: dict[str, str] = {}
        if self._collection.field_selector:
            query["fieldSelector"] = self._collection.field_selector
        return query

    def list_all(self) -> tuple[list[JsonObject], str]:
        """List every object, page by page; return the items and the list's resourceVersion."""
        return list_collection(self._http, self._collection)

    def _watch(self, version: str) -> str:
        """Watch from ``version``; return the last version seen. Raises GoneError to force a relist."""
        query = {
            **self._query(),
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._watch_seconds),
        }
        for event in self._http.watch(self._collection.path, query, timeout=self._watch_seconds + 30):
            if self._stop.is_set():
                return version
            kind = str(event.get("type", ""))
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code", 0) or 0)
                if code == 410:
                    raise GoneError(410, "Expired", str(obj.get("message", "")))
                raise KubeError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
            version = str((obj.get("metadata") or {}).get("resourceVersion", version))
            if kind in ("ADDED", "MODIFIED", "DELETED"):
                self._on_event(kind, obj)
        return version

    def run(self) -> None:
        """List and watch until ``stop`` is set; never raises."""
        backoff = 0.2
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    items, version = self.list_all()
                    self._on_replace(items)
                    self.synced.set()
                version = self._watch(version)
                backoff = 0.2
            except GoneError:
                log.info("watch of %s expired; listing again", self._collection.path)
                version = ""
            except NotFoundError as exc:
                if not self._collection.optional:
                    log.warning("list/watch of %s failed: %s", self._collection.path, exc)
                    self._stop.wait(backoff)
                    backoff = min(self._max_backoff, backoff * 2)
                    continue
                log.info(
                    "%s does not exist (CRD not installed?); treating it as empty", self._collection.path
                )
                self._on_replace([])
                self.synced.set()
                version = ""
                self._stop.wait(self._collection.optional_retry)
            except KubeError as exc:
                log.warning("list/watch of %s failed: %s", self._collection.path, exc)
                self._stop.wait(backoff)
                backoff = min(self._max_backoff, backoff * 2)
            except Exception:  # a handler bug must not end the watch silently
                log.exception("list/watch of %s crashed; listing again", self._collection.path)
                version = ""
                self._stop.wait(backoff)
                backoff = min(self._max_backoff, backoff * 2)
