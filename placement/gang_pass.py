"""One reconcile pass over gangs: keep PodGroup status true, evict gangs that fell below ``minMember``.

A member on a node that is not Ready or was deleted counts as lost (``scheduling.nodes.readiness``), so a
gang that spans a dead node is evicted whole after the grace period, with an event naming the node.

Decisions are the core's (``scheduling.gang.status``, ``scheduling.gang.staleness``); this module
remembers since when each gang has been short (in memory: after a restart the grace period starts
again, which only delays an eviction) and when the elastic pass last deleted members of a gang to be
re-created, and performs the writes. A job's last move is read from its MPIJob
(``phalanx.io/elastic-moved-at``), so a restarted manager knows it too; a re-pin writes nothing there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kubeio.errors import KubeError
from kubeio.ports import EventSink, GroupStatusSink
from kubeio.render import podgroup_ref, podgroup_status
from placement.round import Round
from scheduling.gang.staleness import check_stale, within
from scheduling.gang.status import gang_status
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
        self._replaced_at: dict[str, float] = {}  # gang -> when the elastic pass last deleted members

    def run(self, facts: Round) -> GangReport:
        """Run one pass over every PodGroup of the round's snapshot."""
        now = self._clock()
        statuses: list[str] = []
        evicted: list[str] = []
        errors: list[str] = []
        seen: set[str] = set()
        snapshot = facts.snapshot
        nodes = snapshot.nodes if facts.nodes_listed else None
        self._replaced_at = {
            k: self._replaced_at[k] for k in within(self._replaced_at, now=now, grace=self._grace)
        }
        # Wall-clock times, as written on the MPIJob; the MPI Operator names a job's PodGroup after the job.
        moved_at = {f"{job.namespace}/{job.name}": job.moved_at for job in facts.mpijobs or ()}
        excused = within(moved_at, now=facts.now, grace=self._grace) | self._replaced_at.keys()
        for group in snapshot.podgroups():
            seen.add(group.key)
            members = snapshot.members(group.key)
            try:
                if self._write_status(group, members):
                    statuses.append(group.key)
                if self._evict_if_stale(group, members, nodes, now, excused=group.key in excused):
                    evicted.append(group.key)
            except KubeError as exc:
                log.warning("gang %s: %s", group.key, exc)
                errors.append(group.key)
        for gone in set(self._short_since) - seen:
            del self._short_since[gone]
        return GangReport(tuple(statuses), tuple(evicted), tuple(errors))

    def replacing(self, groups: Sequence[str]) -> None:
        """The elastic pass deleted members of ``groups`` (moved, or re-pinned while waiting) just now.

        Their operator re-creates them, and until then each gang is short. A re-pin writes nothing on
        the MPIJob, so this memory is what covers it (lost on a restart, like the shortage clocks).
        """
        now = self._clock()
        for group in groups:
            self._replaced_at[group] = now

    def _write_status(self, group: PodGroup, members: list[Pod]) -> bool:
        status = gang_status(group, members)
        counts = (status.scheduled, status.running, status.succeeded, status.failed)
        if status.phase == group.phase and counts == group.counts:
            return False
        self._sink.set_status(group.namespace, group.name, podgroup_status(status))
        return True

    def _evict_if_stale(
        self,
        group: PodGroup,
        members: list[Pod],
        nodes: Mapping[str, Node] | None,
        now: float,
        *,
        excused: bool,
    ) -> bool:
        since = self._short_since.get(group.key)
        check = check_stale(
            group, members, nodes, short_since=since, now=now, grace=self._grace, excused=excused
        )
        if check.short_since is None:
            self._short_since.pop(group.key, None)
        else:
            self._short_since[group.key] = check.short_since
        shortage = check.evict
        if shortage is None:
            return False
        log.warning("%s", shortage.message)
        # The event first: written after, a crash between the deletions and it would lose it for good.
        self._events.record_now(podgroup_ref(group), "Warning", "GangEvicted", shortage.message)
        for pod in shortage.holding:
            self._sink.delete_pod(pod.namespace, pod.name, pod.uid)
        self._on_evict(group)
        return True
