"""The one in-memory fake of phalanx's API boundary, ``kubeio.http.JsonRequester.request``.

Every unit test that hands a reader or writer an API server uses this fake, so the port is faked once:

- ``collections`` (path -> items) answer GETs of a list, paged as the API server pages (``limit`` and
  ``continue``); a GET of a path it does not have is a 404 (a CRD not installed), so readers run their
  real paging loop;
- ``objects`` (path -> object, or an exception to raise) answer any request for that exact path;
- ``replies`` answer requests in order, before anything else (a reply may be an exception to raise);
- ``answer`` computes a reply from the request, for a fake with rules of its own;
- ``streams`` (path -> events) answer the first watch of that path; every later watch, or a watch of
  another path, ends after a short wait with no event, as a quiet stream's timeout does (slowed down so
  that a reflector's re-watch loop does not spin);
- a write to anything else answers ``{}``.

Every request is recorded in ``sent`` (``Sent``: method, path, query, body, content type, timeout). The
real API server is left to tests/e2e.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject


@dataclass(frozen=True, slots=True)
class Sent:
    """One request as the fake received it."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    content_type: str
    timeout: float


@dataclass
class FakeApi:
    """An API server in memory: see the module docstring for how it answers."""

    collections: dict[str, list[JsonObject]] = field(default_factory=dict)
    objects: dict[str, JsonObject | Exception] = field(default_factory=dict)
    replies: list[JsonObject | Exception] = field(default_factory=list)
    answer: Callable[[Sent], JsonObject] | None = None
    read_only: bool = True
    """Refuse any write: a reader under test must send none (a writer's test says ``read_only=False``)."""
    streams: dict[str, list[JsonObject]] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)

    @property
    def queries(self) -> list[tuple[str, dict[str, str]]]:
        """The path and query of every GET, in order."""
        return [(s.path, s.query) for s in self.sent if s.method == "GET"]

    @property
    def writes(self) -> list[Sent]:
        """Every request but GETs, in order."""
        return [s for s in self.sent if s.method != "GET"]

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> JsonObject:
        """Record the request and answer it (see the module docstring)."""
        sent = Sent(method, path, dict(query or {}), body, content_type, timeout)
        self.sent.append(sent)
        assert not (self.read_only and method != "GET"), f"a reader sent {method} {path}"
        if self.replies:
            return _given(self.replies.pop(0))
        if self.answer is not None:
            return self.answer(sent)
        if path in self.objects:
            return _given(self.objects[path])
        if method == "GET" and path in self.collections:
            return _page(self.collections[path], sent.query)
        if method == "GET":
            raise NotFoundError(404, "NotFound", f"the server could not find the requested resource ({path})")
        return {}

    def watch(self, path: str, query: Mapping[str, str], *, timeout: float) -> Iterator[JsonObject]:
        """Record the watch and yield ``path``'s stream once (see the module docstring)."""
        self.sent.append(Sent("WATCH", path, dict(query), None, "", timeout))
        events = self.streams.pop(path, None)
        if events is None:
            time.sleep(0.02)
            return
        yield from events


def _given(reply: JsonObject | Exception) -> JsonObject:
    if isinstance(reply, Exception):
        raise reply
    return reply


def _page(items: list[JsonObject], query: Mapping[str, str]) -> JsonObject:
    """One page of ``items`` as the API server returns it: ``limit`` items from the ``continue`` token."""
    start = int(query.get("continue") or 0)
    limit = int(query.get("limit") or len(items) or 1)
    meta: dict[str, Any] = {"resourceVersion": "42"}
    if start + limit < len(items):
        meta["continue"] = str(start + limit)
    return {"items": items[start : start + limit], "metadata": meta}
