"""Capacity promised to pods that are not bound yet: the one ledger every decision respects.

Two kinds of decision make promises. ``bind`` of a pod on its own picks GPU indices and promises them
until the pod's watch event (with ``spec.nodeName`` and ``phalanx.io/gpus``) reaches the cache, so a
concurrent bind cannot hand them out twice. ``filter`` of a gang member plans the whole gang and
promises every member its node and GPUs (a reservation, docs/design/gang-scheduling.md §1), so no other pod or
gang can take half of what the gang needs. A promise ends when the cache shows the pod bound or gone, when its
bind fails or its gang gives up, or when it expires.

The book is an immutable value: every change returns a new book, so a reader never sees it half-updated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from scheduling.model import Resources

_NONE: Mapping[str, Promise] = MappingProxyType({})
_NO_NODES: Mapping[str, frozenset[int]] = MappingProxyType({})
_NO_GPUS: frozenset[int] = frozenset()
_NO_REQUESTS: Mapping[str, Resources] = MappingProxyType({})
_NO_GROUPS: Mapping[str, frozenset[str]] = MappingProxyType({})
_ZERO = Resources()


@dataclass(frozen=True, slots=True)
class Promise:
    """GPUs promised to one pod on one node.

    Attributes:
        pod_uid: the pod's UID.
        pod_key: ``namespace/name``, for messages.
        node: the node the pod is being bound to.
        gpus: the promised GPU indices, sorted.
        expires_at: when the promise lapses if nothing confirmed or released it (seconds, caller's clock).
        requests: the pod's requests, so CPU and memory promised on a node count too.
        group: the ``namespace/name`` of the pod's gang, for reservations made at filter.
    """

    pod_uid: str
    pod_key: str
    node: str
    gpus: tuple[int, ...]
    expires_at: float
    requests: Resources = field(default_factory=Resources)
    group: str | None = None


@dataclass(frozen=True, slots=True)
class PromiseBook:
    """All open promises, by pod UID, with the promised indices indexed by node for the filter path."""

    by_uid: Mapping[str, Promise] = field(default_factory=lambda: _NONE)
    by_node: Mapping[str, frozenset[int]] = field(default_factory=lambda: _NO_NODES)
    requested_by_node: Mapping[str, Resources] = field(default_factory=lambda: _NO_REQUESTS)
    by_group: Mapping[str, frozenset[str]] = field(default_factory=lambda: _NO_GROUPS)

    @staticmethod
    def of(promises: Mapping[str, Promise]) -> PromiseBook:
        """Build a book from promises by UID, deriving the per-node and per-group indexes."""
        nodes: dict[str, set[int]] = {}
        requested: dict[str, Resources] = {}
        groups: dict[str, set[str]] = {}
        for uid, promise in promises.items():
            nodes.setdefault(promise.node, set()).update(promise.gpus)
            was = requested.get(promise.node, _ZERO)
            add = promise.requests
            requested[promise.node] = Resources(
                was.milli_cpu + add.milli_cpu, was.memory + add.memory, was.gpus + add.gpus
            )
            if promise.group is not None:
                groups.setdefault(promise.group, set()).add(uid)
        return PromiseBook(
            MappingProxyType(dict(promises)),
            MappingProxyType({node: frozenset(gpus) for node, gpus in nodes.items()}),
            MappingProxyType(requested),
            MappingProxyType({group: frozenset(uids) for group, uids in groups.items()}),
        )

    def add_all(self, promises: Iterable[Promise]) -> PromiseBook:
        """Return a book with every promise in ``promises`` added (one gang's reservation at once)."""
        updated = dict(self.by_uid)
        for promise in promises:
            updated[promise.pod_uid] = promise
        return PromiseBook.of(updated)

    def release_group(self, group: str) -> PromiseBook:
        """Return a book without any promise to members of ``group``."""
        uids = self.by_group.get(group)
        if not uids:
            return self
        return PromiseBook.of({uid: p for uid, p in self.by_uid.items() if uid not in uids})

    def renew_group(self, group: str, until: float) -> PromiseBook:
        """Return a book in which the promises to members of ``group`` last at least ``until``.

        >>> book = PromiseBook().add(Promise("u", "ns/p", "n1", (0,), 10.0, group="ns/g"))
        >>> book.renew_group("ns/g", 30.0).by_uid["u"].expires_at, book.renew_group("ns/g", 5.0) is book
        (30.0, True)
        """
        uids = self.by_group.get(group)
        if not uids or all(self.by_uid[uid].expires_at >= until for uid in uids):
            return self
        updated = dict(self.by_uid)
        for uid in uids:
            updated[uid] = replace(updated[uid], expires_at=max(updated[uid].expires_at, until))
        return PromiseBook.of(updated)

    def requested_on(self, node: str) -> Resources:
        """CPU, memory and GPUs promised on ``node``."""
        return self.requested_by_node.get(node, _ZERO)

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
