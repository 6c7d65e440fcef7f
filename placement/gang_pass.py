"""One reconcile pass over gangs: keep PodGroup status true, evict gangs that fell below ``minMember``.

A member on a node that is not Ready or was deleted counts as lost (``scheduling.nodes.readiness``), so a
gang that spans a dead node is evicted whole after the grace period, with an event naming the node.

Decisions are the core's (``scheduling.gang.status``); this module remembers since when each gang has
been short (in memory: after a restart the grace period starts again, which only delays an eviction)
and performs the writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kubeio.errors import KubeError
from kubeio.ports import EventSink, GroupStatusSink
from kubeio.render import podgroup_ref, podgroup_status
from placement.round import Round
from scheduling.gang.status import find_shortage, gang_status
from scheduling.model import Node, Pod, PodGroup

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GangReport:
    """What one pass did."""

    statuses: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    errors: tuple[str, ...] = field(default=())


class GangPass:
    """Gang status and stale-gang eviction."""

    def __init__(
        self,
        sink: GroupStatusSink,
        events: EventSink,
        *,
        clock: Callable[[], float],
        grace_seconds: float,
        on_evict: Callable[[PodGroup], None] = lambda _group: None,
    ) -> None:
        self._sink = sink
        self._events = events
        self._clock = clock
        self._grace = grace_seconds
        self._on_evict = on_evict
        self._short_since: dict[str, float] = {}

    def run(self, facts: Round) -> GangReport:
        """Run one pass over every PodGroup of the round's snapshot."""
        now = self._clock()
        statuses: list[str] = []
        evicted: list[str] = []
        errors: list[str] = []
        seen: set[str] = set()
        snapshot = facts.snapshot
        nodes = snapshot.nodes if facts.nodes_listed else None
        for group in snapshot.podgroups():
            seen.add(group.key)
            members = snapshot.members(group.key)
            try:
                if self._write_status(group, members):
                    statuses.append(group.key)
                if self._evict_if_stale(group, members, nodes, now):
                    evicted.append(group.key)
            except KubeError as exc:
                log.warning("gang %s: %s", group.key, exc)
                errors.append(group.key)
        for gone in set(self._short_since) - seen:
            del self._short_since[gone]
        return GangReport(tuple(statuses), tuple(evicted), tuple(errors))

    def _write_status(self, group: PodGroup, members: list[Pod]) -> bool:
        status = gang_status(group, members)
        counts = (status.scheduled, status.running, status.succeeded, status.failed)
        if status.phase == group.phase and counts == group.counts:
            return False
        self._sink.set_status(group.namespace, group.name, podgroup_status(status))
        return True

    def _evict_if_stale(
        self, group: PodGroup, members: list[Pod], nodes: Mapping[str, Node] | None, now: float
    ) -> bool:
        shortage = find_shortage(group, members, nodes)
        if shortage is None:
            self._short_since.pop(group.key, None)
            return False
        since = self._short_since.setdefault(group.key, now)
        if now - since < self._grace:
            return False
        log.warning("%s", shortage.message)
        # The event first: written after, a crash between the deletions and it would lose it for good.
        self._events.record_now(podgroup_ref(group), "Warning", "GangEvicted", shortage.message)
        for pod in shortage.holding:
            self._sink.delete_pod(pod.namespace, pod.name, pod.uid)
        del self._short_since[group.key]
        self._on_evict(group)
        return True
