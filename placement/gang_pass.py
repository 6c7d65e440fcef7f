"""One reconcile pass over gangs: keep PodGroup status true, evict gangs that fell below ``minMember``.

A member on a node that is not Ready or was deleted counts as lost (``scheduling.nodes.readiness``), so a
gang that spans a dead node is evicted whole after the grace period, with an event naming the node.

Decisions are the core's (``scheduling.gang.status``); this module remembers since when each gang has
been short (in memory: after a restart the grace period starts again, which only delays an eviction)
and performs the writes.

A gang whose elastic MPIJob had a worker moved within the grace period is not short yet, whatever its
members say: a move deletes the worker and its operator re-creates it under the same name once the old
pod is gone, so the job can have fewer than ``minMember`` members for as long as that takes (all its
workers when a resize moves every one). Counted as lost, a move the placement manager made on purpose
would have the gang evicted (its launcher too: the job restarts from scratch) whenever the re-creation
takes longer than the grace period, as on a loaded control plane. The time of the job's last move is
the one written on the MPIJob (``phalanx.io/elastic-moved-at``), so a restarted manager knows it too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
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
        self._replaced_at = {k: at for k, at in self._replaced_at.items() if now - at < self._grace}
        moving = _moving(facts, self._grace) | self._replaced_at.keys()
        for group in snapshot.podgroups():
            seen.add(group.key)
            members = snapshot.members(group.key)
            try:
                if self._write_status(group, members):
                    statuses.append(group.key)
                if group.key in moving:
                    self._short_since.pop(group.key, None)  # a short gang's clock starts after the move
                elif self._evict_if_stale(group, members, nodes, now):
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


def _moving(facts: Round, grace: float) -> frozenset[str]:
    """The MPIJobs (``namespace/name``, their PodGroup's key) that had a worker moved in the last ``grace`` s.

    The MPI Operator names a job's PodGroup after the job. Times are wall-clock seconds, as written on
    the MPIJob and as ``facts.now``. A move time ahead of the clock by less than ``grace`` (a leader on
    another node, its clock a little ahead) counts as recent; one further ahead (a clock stepped back
    by hours) does not, or the job could not be evicted as stale until the clock caught up.
    """
    return frozenset(
        f"{job.namespace}/{job.name}"
        for job in facts.mpijobs or ()
        if job.moved_at is not None and abs(facts.now - job.moved_at) < grace
    )
