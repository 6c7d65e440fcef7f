"""Tell each refused object why: a Warning event on the object, once per object and reason.

The cache refuses what it cannot read or will not model (``kubeio.refusals``) and carries on with every
other object; without this pass the only trace would be a line in phalanx's log, which the owner of the
object never reads. The event lands where they look (``kubectl describe``, ``kubectl get events``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubeio.ports import EventSink
from kubeio.refusals import Refusal

REASON = "Refused"
"""The event's reason: phalanx does not use this object as it is."""


class RefusalPass:
    """Records one Warning event per refused object and reason; forgets objects no longer refused."""

    def __init__(self, refusals: Callable[[], Iterable[Refusal]], events: EventSink) -> None:
        self._refusals = refusals
        self._events = events
        self._told: set[Refusal] = set()

    def run(self) -> tuple[Refusal, ...]:
        """Record an event for each refusal not told yet; return those."""
        standing = set(self._refusals())
        told = tuple(sorted(standing - self._told, key=lambda r: (r.kind, r.key)))
        for refusal in told:
            self._events.record(
                refusal.ref, "Warning", REASON, f"phalanx refuses this {refusal.kind}: {refusal.reason}"
            )
        self._told = standing  # a refusal that ends and comes back is told again
        return told
