"""One placement round: the facts read once, then the passes in a written order, each timed by name.

A round reads the cluster once (one snapshot of the cache, one queue view, one MPIJob listing, the wall
clock) and hands the same ``Round`` to every pass, so no two passes of a round can disagree on what they
saw, and no pass reads the cache again. The passes run in this order, and the order is the contract:

1. **gang** (``placement.gang_pass``): PodGroup status, gangs that fell below ``minMember`` evicted.
2. **elastic** (``placement.elastic_pass``): elastic MPIJobs sized, moved and pinned. It runs before
   reclaim because its report names the elastic jobs above their minimum: those give room back by
   shrinking, so reclaim must leave them out in this very round. Run after reclaim (as it once was),
   a fresh process's first round had no such set yet, and reclaim could evict a whole elastic job where
   shrinking it was enough.
3. **queue** (``placement.queue_pass``): Queue status, reclaim for queues below their fair share, told
   which elastic jobs shrink instead (the elastic report's, or the last one known when the elastic pass
   failed or could not list MPIJobs) and which are shrinking now: reclaim waits for the room those free
   before it evicts anyone, so an elastic surplus goes back before a gang is evicted.
4. **refusal** (``placement.refusal_pass``): a Warning event on each object the cache refused.
5. **gate bypass** (``placement.bypass_pass``), when admission gates are on: pods created around the gate.

Each pass runs on its own: one that raises (a bug its log shows) is counted by name and the others go on.
The release pass is not a step of the round: it runs on its own thread, woken by every pod change
(``placement.release_loop``), because a gated pod must not wait for a round.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol, TypeVar

from kubeio.errors import KubeError
from kubeio.mpijobs import MpiJob
from kubeio.ports import ClusterSource, MpiJobLister
from placement.views import SharedView
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.queues.view import QueueView

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Round:
    """What every pass of one round reads.

    Attributes:
        snapshot: the cache's snapshot.
        nodes_listed: whether the node watch has listed nodes once (until then no node looks deleted).
        view: the queue view of ``snapshot``.
        mpijobs: every MPIJob, or ``None`` when they could not be listed (the elastic pass waits a round).
        now: wall-clock seconds (compared with creationTimestamps and times written on objects).
    """

    snapshot: ClusterSnapshot
    view: QueueView
    mpijobs: tuple[MpiJob, ...] | None
    now: float
    nodes_listed: bool = True


class RoundSource(ClusterSource, Protocol):
    """The cache as a round reads it (``kubeio.cluster_cache.ClusterCache``)."""

    def nodes_listed(self) -> bool:
        """Whether the node watch has listed nodes once."""


class RoundReader:
    """Reads a round's facts: one snapshot, one queue view, one MPIJob listing."""

    def __init__(
        self, source: RoundSource, mpijobs: MpiJobLister, views: SharedView, *, clock: Callable[[], float]
    ) -> None:
        self._source = source
        self._mpijobs = mpijobs
        self._views = views
        self._clock = clock

    def read(self) -> Round:
        """The facts of a round starting now."""
        snapshot = self._source.snapshot()
        try:
            mpijobs: tuple[MpiJob, ...] | None = tuple(self._mpijobs.list())
        except KubeError as exc:  # e.g. the MPIJob CRD's storage still initialising: next round
            log.info("MPIJobs not listed (%s); the elastic pass waits for the next round", exc)
            mpijobs = None
        return Round(snapshot, self._views.of(snapshot), mpijobs, self._clock(), self._source.nodes_listed())


class GangPassLike(Protocol):
    """``placement.gang_pass.GangPass``."""

    def run(self, facts: Round) -> object:
        """One pass."""

    def replacing(self, groups: Sequence[str]) -> None:
        """The gangs whose members the elastic pass deleted for their operator to re-create."""


class ElasticPassLike(Protocol):
    """``placement.elastic_pass.ElasticPass``: its report names the jobs that may shrink."""

    def run(self, facts: Round) -> ElasticReportLike:
        """One pass."""


class ElasticReportLike(Protocol):
    """The part of an elastic report the round reads."""

    @property
    def above_minimum(self) -> frozenset[str] | None:
        """PodGroup keys of the elastic jobs above their minimum; ``None``: not known this round."""

    @property
    def giving_back(self) -> tuple[str, ...]:
        """PodGroup keys of the elastic jobs shrinking now."""

    @property
    def replacing(self) -> tuple[str, ...]:
        """PodGroup keys of the elastic jobs whose workers this pass deleted to be re-created."""


class QueuePassLike(Protocol):
    """``placement.queue_pass.QueuePass``."""

    def run(self, facts: Round, *, shrinking: frozenset[str], giving_back: Sequence[str]) -> object:
        """One pass over ``facts``.

        ``shrinking``: the groups that give room back by shrinking, not by eviction; ``giving_back``:
        those shrinking now, whose room reclaim waits for.
        """


@dataclass(slots=True)
class RoundReport:
    """Each pass's report by name (absent: it failed), how long each took, and those that failed.

    Filled as the round goes (not frozen): a pass that raises still leaves its time and its name.
    """

    reports: dict[str, object] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)


class PlacementRound:
    """Runs the passes of a round in the written order (module docstring)."""

    def __init__(
        self,
        *,
        gang: GangPassLike,
        elastic: ElasticPassLike,
        queue: QueuePassLike,
        after: Sequence[tuple[str, Callable[[Round], object]]] = (),
        timer: Callable[[], float],
        on_pass: Callable[[str, float, bool], None] = lambda _name, _seconds, _ok: None,
    ) -> None:
        """Create the round.

        Args:
            gang: the gang pass.
            elastic: the elastic pass.
            queue: the queue pass.
            after: the passes that need nothing from the others, by name, run last in this order.
            timer: monotonic seconds, to time each pass.
            on_pass: called with each pass's name, its seconds and whether it succeeded (metrics).
        """
        self._gang = gang
        self._elastic = elastic
        self._queue = queue
        self._after = tuple(after)
        self._timer = timer
        self._on_pass = on_pass
        self._shrinking: frozenset[str] = frozenset()

    def run(self, facts: Round) -> RoundReport:
        """Run every pass once over ``facts``."""
        report = RoundReport()
        self._one(report, "gang", lambda: self._gang.run(facts))
        elastic = self._one(report, "elastic", lambda: self._elastic.run(facts))
        if elastic is not None:
            self._gang.replacing(elastic.replacing)  # short until re-created: not stale
        if elastic is not None and elastic.above_minimum is not None:
            self._shrinking = elastic.above_minimum
        shrinking, back = self._shrinking, () if elastic is None else elastic.giving_back
        self._one(report, "queue", lambda: self._queue.run(facts, shrinking=shrinking, giving_back=back))
        for name, step in self._after:
            self._one(report, name, partial(step, facts))
        return report

    def _one(self, report: RoundReport, name: str, step: Callable[[], T]) -> T | None:
        """Run one pass, time it, and file its report under ``name`` (``None``: it raised)."""
        started = self._timer()
        try:
            done = step()
        except Exception:  # one failing pass must not keep the others from running
            log.exception("%s pass failed; the other passes go on", name)
            report.failed.append(name)
            return None
        finally:
            report.seconds[name] = self._timer() - started
            self._on_pass(name, report.seconds[name], name not in report.failed)
        report.reports[name] = done
        return done
