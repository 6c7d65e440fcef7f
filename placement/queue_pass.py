"""Queue reconcile pass: write every queue's status, and reclaim for queues below their fair share.

Reclaim gives a starved queue its fair share back by evicting whole preemptible gangs of queues above
theirs (``scheduling.queues.reclaim_planner.plan_reclaim``: the fewest that make room, checked on the real
nodes with the gang planner before anything is evicted, never a gang younger than its queue's minimum
runtime), applied by ``placement.plan_applier``: a "Reclaimed" event on each pod, then its deletion. It
waits while pods it evicted are still terminating, so one need never evicts twice, and each pass keeps
the victims' queues at or above their own fair share (no ping-pong).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubeio.ports import EventSink, PodDeleter, QueueSink
from kubeio.render import queue_status
from placement.plan_applier import apply_evictions
from placement.round import Round
from scheduling.model import TERMINAL_PHASES, Pod
from scheduling.queues import Victim
from scheduling.queues.reclaim_planner import plan_reclaim
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)

SHRINK_WAIT = 60.0
"""Seconds reclaim waits at most for elastic jobs giving room back: a worker terminating on a dead node
never finishes, and one such job must not stop reclaim for every queue."""


@dataclass(frozen=True, slots=True)
class QueueReport:
    """What one pass did: queues whose status was written, gangs evicted, and the reclaim messages."""

    statuses: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    messages: tuple[str, ...] = ()


class QueuePass:
    """Queue status and reclaim, one pass at a time."""

    def __init__(
        self,
        sink: QueueSink,
        deleter: PodDeleter,
        events: EventSink,
        *,
        topologies: TopologyCache,
        on_evict: Callable[[Victim], None] = lambda _victim: None,
    ) -> None:
        self._sink = sink
        self._deleter = deleter
        self._events = events
        self._topologies = topologies
        self._on_evict = on_evict
        self._written: dict[str, dict[str, Any]] = {}
        self._terminating: set[str] = set()
        self._back_since: float | None = None

    def run(
        self, facts: Round, *, shrinking: frozenset[str] = frozenset(), giving_back: Sequence[str] = ()
    ) -> QueueReport:
        """Write changed statuses from the round's view, and reclaim if a queue is starved.

        ``shrinking`` names the groups that give room back by shrinking rather than by eviction: elastic
        MPIJobs above their minimum, as the round's elastic pass found them (the elastic pass shrinks
        them for waiting groups). Reclaim leaves them out, and waits while any job of ``giving_back``
        is shrinking, so their surplus goes first: a gang is evicted only for what shrinking did not
        free, and a whole elastic job only at its minimum.
        """
        snapshot, view = facts.snapshot, facts.view
        statuses = self._write_statuses(view)
        self._terminating = {u for u in self._terminating if _live(snapshot.pod_by_uid(u))}
        if self._terminating:
            return QueueReport(statuses)
        if not giving_back:
            self._back_since = None
        else:
            since = self._back_since = facts.now if self._back_since is None else self._back_since
            if facts.now - since < SHRINK_WAIT:
                jobs = ", ".join(giving_back)
                wait = f"reclaim waits: elastic job(s) {jobs} give room back by shrinking first"
                return QueueReport(statuses, messages=(wait,))
        reclaim = plan_reclaim(snapshot, view, self._topologies, now=facts.now, shrinking=shrinking)
        for victim in reclaim.victims:  # gang by gang, as chosen
            members = [e for e in reclaim.plan.evictions if e.group == victim.gang]
            deleted = apply_evictions(members, self._events, self._deleter, reason="Reclaimed")
            self._terminating.update(deleted)
            self._on_evict(victim)
        return QueueReport(
            statuses, tuple(v.gang for v in reclaim.victims), tuple(c.message for c in reclaim.evicting)
        )

    def _write_statuses(self, view: QueueView) -> tuple[str, ...]:
        written = []
        names = view.tree.queues.keys() | view.tree.rejected.keys()
        self._written = {n: status for n, status in self._written.items() if n in names}  # deleted: forgotten
        for name in sorted(names):
            status = queue_status(view, name)
            if self._written.get(name) == status:
                continue
            try:
                self._sink.set_status(name, status)
            except Exception as exc:  # the implicit default queue has no object to write to
                log.debug("queue %s: status not written: %s", name, exc)
                continue
            self._written[name] = status
            written.append(name)
        return tuple(written)


def _live(pod: Pod | None) -> bool:
    return pod is not None and pod.phase not in TERMINAL_PHASES
