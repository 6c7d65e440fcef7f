"""GPUs promised to pods whose binding the cluster cache has not shown yet.

Between the moment ``bind`` picks GPU indices for a pod and the moment the pod's watch event (with
``spec.nodeName`` and the ``phalanx.io/gpus`` annotation) reaches the cache, those GPUs must count as
taken, or a concurrent bind could hand them out twice. A promise ends when the cache shows the pod bound
or gone, when its bind fails, or when it expires (a safety net against a lost watch event).

The book is an immutable value: every change returns a new book, so a reader never sees it half-updated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

_NONE: Mapping[str, Promise] = MappingProxyType({})
_NO_NODES: Mapping[str, frozenset[int]] = MappingProxyType({})
_NO_GPUS: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class Promise:
    """GPUs promised to one pod on one node.

    Attributes:
        pod_uid: the pod's UID.
        pod_key: ``namespace/name``, for messages.
        node: the node the pod is being bound to.
        gpus: the promised GPU indices, sorted.
        expires_at: when the promise lapses if nothing confirmed or released it (seconds, caller's clock).
    """

    pod_uid: str
    pod_key: str
    node: str
    gpus: tuple[int, ...]
    expires_at: float


@dataclass(frozen=True, slots=True)
class PromiseBook:
    """All open promises, by pod UID, with the promised indices indexed by node for the filter path."""

    by_uid: Mapping[str, Promise] = field(default_factory=lambda: _NONE)
    by_node: Mapping[str, frozenset[int]] = field(default_factory=lambda: _NO_NODES)

    @staticmethod
    def of(promises: Mapping[str, Promise]) -> PromiseBook:
        """Build a book from promises by UID, deriving the per-node index."""
        nodes: dict[str, set[int]] = {}
        for promise in promises.values():
            nodes.setdefault(promise.node, set()).update(promise.gpus)
        return PromiseBook(
            MappingProxyType(dict(promises)),
            MappingProxyType({node: frozenset(gpus) for node, gpus in nodes.items()}),
        )

    def add(self, promise: Promise) -> PromiseBook:
        """Return a book with ``promise`` added, replacing any earlier promise to the same pod."""
        updated = dict(self.by_uid)
        updated[promise.pod_uid] = promise
        return PromiseBook.of(updated)

    def release(self, pod_uid: str) -> PromiseBook:
        """Return a book without the promise to ``pod_uid`` (unchanged if there is none)."""
        if pod_uid not in self.by_uid:
            return self
        updated = dict(self.by_uid)
        del updated[pod_uid]
        return PromiseBook.of(updated)

    def expire(self, now: float) -> tuple[PromiseBook, tuple[Promise, ...]]:
        """Return the book without promises that lapsed at ``now``, and the lapsed ones by UID."""
        lapsed = tuple(p for _, p in sorted(self.by_uid.items()) if p.expires_at <= now)
        if not lapsed:
            return self, ()
        return PromiseBook.of({uid: p for uid, p in self.by_uid.items() if p.expires_at > now}), lapsed

    def on_node(self, node: str) -> frozenset[int]:
        """The GPU indices promised on ``node``.

        >>> book = PromiseBook().add(Promise("u", "ns/p", "n1", (2, 3), 10.0))
        >>> sorted(book.on_node("n1")), sorted(book.on_node("n2"))
        ([2, 3], [])
        """
        return self.by_node.get(node, _NO_GPUS)
