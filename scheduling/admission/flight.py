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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from immutables import Map

from scheduling.cluster.ledger import Flight, Waiting, is_released
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod, group_key

_NEVER: Mapping[str, float] = Map()
_NONE_REFUSED: Mapping[str, frozenset[str]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ReleasedBook:
    """When each group was released (group key to seconds, the caller's clock); an immutable value.

    ``at`` is a persistent map, so that a door admission or a pass adds or drops a few entries without
    copying the book. ``refused`` holds, by pod key, the nodes kube-scheduler turned the pod's carried
    plans down on for what the core does not model (``GateSettings.plan_refused_after``): the pass
    plans it elsewhere.
    """

    at: Mapping[str, float] = field(default_factory=lambda: _NEVER)
    refused: Mapping[str, frozenset[str]] = field(default_factory=lambda: _NONE_REFUSED)

    def with_released(self, keys: Iterable[str], now: float) -> ReleasedBook:
        """The book with ``keys`` released at ``now`` (an entry already there keeps its time)."""
        at = _persistent(self.at)
        added = at
        for key in keys:
            if key not in added:
                added = added.set(key, now)
        return self if added is self.at else ReleasedBook(added, self.refused)

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
        return ReleasedBook(_persistent(self.at).delete(key), self.refused)


@dataclass(frozen=True, slots=True)
class InFlight:
    """Released groups not bound yet, as the difference from every released group (``Waiting.released``).

    Most decisions count every released group whole; the few that are not are named, so a decision
    costs O(those) and not O(groups in flight).

    Attributes:
        waiting: the unbound pods, grouped.
        lapsed: the released groups that do not count: past ``ttl``, or every pod of them promised.
        partial: the counting groups some pods of which are promised (a promised pod's room is out of
            the free room already): the group with the others only.
        promised: those promised pods, which are neither counted nor held at their plans.
        book: the book to keep: entries of groups with no ungated unbound pod left are dropped, groups
            it did not know are added at ``now``.
    """

    waiting: Waiting
    lapsed: frozenset[str]
    partial: Mapping[str, Flight]
    promised: tuple[Pod, ...]
    book: ReleasedBook

    def counting(self, key: str) -> Flight | None:
        """Group ``key`` as it counts, or ``None`` when it does not."""
        if key in self.lapsed:
            return None
        return self.partial.get(key) or self.waiting.released.get(key)


def in_flight(
    waiting: Waiting,
    snapshot: ClusterSnapshot,
    book: ReleasedBook,
    promises: PromiseBook,
    *,
    now: float,
    ttl: float,
) -> InFlight:
    """The released, unbound groups of ``waiting`` (from ``snapshot``), and which of them count."""
    flights = waiting.released
    at = _persistent(book.at)
    known = frozenset(at)
    for key in sorted(known - flights.keys()):
        at = at.delete(key)
    for key in sorted(flights.keys() - known):
        at = at.set(key, now)
    refused = book.refused
    if refused:  # the nodes refused for pods still waiting; kept by pod key
        refused = MappingProxyType({k: v for k, v in refused.items() if _waits(k, snapshot, waiting)})
    lapsed: set[str] = set()
    if at and now - min(at.values()) > ttl:  # some group is past the window (subtraction is monotonic)
        lapsed.update(key for key, released_at in at.items() if now - released_at > ttl)
    promised_in: dict[str, set[str]] = {}  # counting group -> its promised pods
    for uid in sorted(promises.by_uid):
        pod = snapshot.pods.get(uid)
        if pod is not None and _waits(pod.key, snapshot, waiting) and group_key(pod) not in lapsed:
            promised_in.setdefault(group_key(pod), set()).add(pod.key)
    partial: dict[str, Flight] = {}
    for key, keys in sorted(promised_in.items()):
        rest = [p for p in flights[key].pods if p.key not in keys]
        if rest:
            partial[key] = Flight.of(rest)
        else:
            lapsed.add(key)  # all promised: it counts no more, and every pod of it is held as lapsed
    promised = tuple(p for key in sorted(partial) for p in flights[key].pods if p.key in promised_in[key])
    return InFlight(
        waiting,
        frozenset(lapsed),
        MappingProxyType(partial),
        promised,
        ReleasedBook(at, refused),
    )


def _waits(pod_key: str, snapshot: ClusterSnapshot, waiting: Waiting) -> bool:
    """Whether pod ``pod_key`` is released and not bound yet (a pod of a group of ``waiting.released``)."""
    namespace, _, name = pod_key.partition("/")
    pod = snapshot.pod(namespace, name)
    if pod is None or not is_released(pod):
        return False
    flight = waiting.released.get(group_key(pod))
    return flight is not None and any(p is pod for p in flight.pods)


def _persistent(at: Mapping[str, float]) -> Map[str, float]:
    """``at`` as a persistent map (a book built by hand may hold a plain one)."""
    return at if isinstance(at, Map) else Map(at)
