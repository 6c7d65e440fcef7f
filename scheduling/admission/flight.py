"""Groups released from the admission gate and not bound yet: what they will hold, and for how long.

``scheduling.admission.release`` releases a group when it can start now; kube-scheduler binds it a moment
later. Until then its pods are neither gated nor on a node, and the next pass must count them: their
GPUs are no longer free room for the groups behind, they count against their queue's limit, and they
are what kube-scheduler's queue holds (the pass keeps that short). The release time lives in a small
book the placement manager keeps between passes; a group the book does not know (released by a leader
that has since stopped, or created ungated while the webhook was down) is adopted as released now, so
a new leader counts it too. A group counts for ``ttl`` seconds at most: one kube-scheduler cannot place,
for a reason the core does not model (inter-pod affinity, say), must not hold the budget for ever; it
stays in the book, not counting, until it is bound or gone, so it is not adopted again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.cluster.promises import PromiseBook
from scheduling.model import SCHEDULER_NAME, Pod
from scheduling.queues.view import group_key

_NEVER: Mapping[str, float] = MappingProxyType({})
_NONE_REFUSED: Mapping[str, frozenset[str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ReleasedBook:
    """When each group was released (group key to seconds, the caller's clock); an immutable value.

    ``refused`` holds, by pod key, the nodes kube-scheduler turned the pod's carried plans down on for
    what the core does not model (``GateSettings.plan_refused_after``): the pass plans it elsewhere.
    """

    at: Mapping[str, float] = field(default_factory=lambda: _NEVER)
    refused: Mapping[str, frozenset[str]] = field(default_factory=lambda: _NONE_REFUSED)

    def with_released(self, keys: Iterable[str], now: float) -> ReleasedBook:
        """The book with ``keys`` released at ``now`` (an entry already there keeps its time)."""
        added = {key: now for key in keys if key not in self.at}
        return self if not added else ReleasedBook(MappingProxyType({**self.at, **added}), self.refused)

    def with_refused(self, refused: Mapping[str, frozenset[str]]) -> ReleasedBook:
        """The book with these pods' refused nodes replaced (an empty set drops the pod's entry)."""
        if not refused:
            return self
        kept = {k: v for k, v in {**self.refused, **refused}.items() if v}
        return ReleasedBook(self.at, MappingProxyType(kept))

    def without(self, key: str) -> ReleasedBook:
        """The book without ``key`` (its ungate patch failed: it is still gated)."""
        if key not in self.at:
            return self
        return ReleasedBook(MappingProxyType({k: t for k, t in self.at.items() if k != key}), self.refused)


@dataclass(frozen=True, slots=True)
class InFlight:
    """Released groups not bound yet.

    Attributes:
        counting: group key to its ungated, unbound pods without a promise, for the groups still within
            ``ttl`` (a promised pod's room is out of the free room already).
        book: the book to keep: entries of groups with no ungated unbound pod left are dropped, groups
            it did not know are added at ``now``.
    """

    counting: Mapping[str, tuple[Pod, ...]]
    book: ReleasedBook


def in_flight(
    live: Sequence[Pod], book: ReleasedBook, promises: PromiseBook, *, now: float, ttl: float
) -> InFlight:
    """The released, unbound groups among ``live`` pods (not finished, not being deleted)."""
    unbound: dict[str, list[Pod]] = {}
    for pod in live:
        if pod.scheduler_name == SCHEDULER_NAME and not pod.gated and pod.node_name is None:
            unbound.setdefault(group_key(pod), []).append(pod)
    at = {key: book.at.get(key, now) for key in sorted(unbound)}
    refused = {}
    if book.refused:  # the nodes refused for pods still waiting; kept by pod key
        waiting = {p.key for pods in unbound.values() for p in pods}
        refused = {key: nodes for key, nodes in book.refused.items() if key in waiting}
    promised = promises.by_uid
    counting = {}
    for key, released_at in at.items():
        if now - released_at > ttl:
            continue
        pods = unbound[key]
        kept = tuple(p for p in pods if p.uid not in promised) if promised else tuple(pods)
        if kept:
            counting[key] = kept
    return InFlight(MappingProxyType(counting), ReleasedBook(MappingProxyType(at), MappingProxyType(refused)))
