"""An in-memory API server for list requests, at phalanx's own boundary (``KubeHttp.request``).

It pages as the API server does (``limit`` and ``continue``), answers 404 for a collection it does not
have (a CRD not installed), and records every query, so the code under test is exercised through its
real paging loop while the real API server is left to tests/e2e.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject


@dataclass
class FakeApi:
    """Serves ``collections`` (path -> items) to GET requests."""

    collections: dict[str, list[JsonObject]]
    queries: list[tuple[str, dict[str, str]]] = field(default_factory=list)

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
        assert method == "GET", f"a reader sent {method} {path}"
        query = dict(query or {})
        self.queries.append((path, query))
        if path not in self.collections:
            raise NotFoundError(404, "NotFound", f"the server could not find the requested resource ({path})")
        items = self.collections[path]
        start = int(query.get("continue") or 0)
        limit = int(query.get("limit") or len(items) or 1)
        page = items[start : start + limit]
        meta: dict[str, Any] = {"resourceVersion": "42"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        return {"items": page, "metadata": meta}
