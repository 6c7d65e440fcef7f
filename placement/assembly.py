"""The placement round put together from its ports: which pass gets which writer, setting and metric.

``placement.__main__`` calls ``assemble`` with the real writers (``kubeio``); the wiring test calls it
with the in-memory fakes, so what it proves about a round (a fresh manager shrinks an elastic job for a
starved queue rather than evicting it) is proven of the composition that ships, not of a copy.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubeio.ports import EventSink, GroupStatusSink, MpiJobSource, Pinner, QueueSink
from placement.elastic_pass import ElasticPass, ElasticReport
from placement.gang_pass import GangPass, GangReport
from placement.placement_metrics import PlacementMetrics
from placement.placement_settings import PlacementSettings
from placement.queue_pass import QueuePass, QueueReport
from placement.round import PlacementRound, Round, RoundReader, RoundReport, RoundSource
from placement.views import SharedView
from scheduling.topology import TopologyCache

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoundPorts:
    """What a round reads and writes through (``kubeio``'s writers, or the tests' fakes).

    Attributes:
        cache: the cluster cache (snapshots, whether nodes were listed).
        groups: writes PodGroup status and deletes pods (``kubeio.podgroups.PodGroupWriter``).
        queues: writes Queue status (``kubeio.queue_objects.QueueWriter``).
        mpijobs: lists and resizes MPIJobs (``kubeio.mpijobs.MpiJobWriter``).
        pins: pins pods and taints pool nodes (``kubeio.pins.PinWriter``).
        events: records events (``kubeio.events.EventRecorder``).
        topologies: the nodes' GPU topologies, parsed once per annotation.
    """

    cache: RoundSource
    groups: GroupStatusSink
    queues: QueueSink
    mpijobs: MpiJobSource
    pins: Pinner
    events: EventSink
    topologies: TopologyCache


def assemble(
    ports: RoundPorts,
    settings: PlacementSettings,
    metrics: PlacementMetrics,
    views: SharedView,
    *,
    after: Sequence[tuple[str, Callable[[Round], object]]] = (),
) -> tuple[RoundReader, PlacementRound]:
    """The round's reader and its passes, wired to ``ports`` and ``metrics``.

    Args:
        ports: the writers and the cache.
        settings: the placement manager's settings.
        metrics: where each pass's time, failures and actions go.
        views: the queue view shared with the release pass (one build per cluster version).
        after: passes that need nothing from the others (refusals, gate bypass), run last.
    """
    gang = GangPass(
        ports.groups,
        ports.events,
        clock=time.monotonic,
        grace_seconds=settings.stale_grace_seconds,
        on_evict=lambda _group: metrics.stale_gang_evictions.inc(),
    )
    queue = QueuePass(
        ports.queues,
        ports.groups,
        ports.events,
        topologies=ports.topologies,
        on_evict=lambda eviction: metrics.reclaims.labels(eviction.queue).inc(),
    )
    elastic = ElasticPass(
        ports.mpijobs,
        ports.pins,
        ports.groups,
        ports.events,
        clock=time.time,  # wall clock: the time of a job's last move is written on it, read after a restart
        topologies=ports.topologies,
        settings=settings.elastic,
    )

    def on_pass(name: str, seconds: float, ok: bool) -> None:
        metrics.pass_seconds.labels(name).observe(seconds)
        if not ok:
            metrics.pass_failures.labels(name).inc()

    reader = RoundReader(ports.cache, ports.mpijobs, views, clock=time.time)  # wall: creationTimestamps
    passes = PlacementRound(
        gang=gang, elastic=elastic, queue=queue, after=after, timer=time.monotonic, on_pass=on_pass
    )
    return reader, passes


def observe(facts: Round, report: RoundReport, metrics: PlacementMetrics) -> None:
    """Log what a round did and count its actions."""
    metrics.queue_gpus.show(facts.view)
    gangs = report.reports.get("gang")
    if isinstance(gangs, GangReport) and gangs.evicted:
        log.info("evicted stale gangs: %s", ", ".join(gangs.evicted))
    queues = report.reports.get("queue")
    if isinstance(queues, QueueReport):
        for message in queues.messages:
            log.info("%s", message)
    done = report.reports.get("elastic")
    if not isinstance(done, ElasticReport):
        return
    metrics.elastic_actions.labels("grow").inc(done.grown)
    metrics.elastic_actions.labels("shrink").inc(len(done.resized) - done.grown)
    metrics.elastic_actions.labels("move").inc(len(done.moved))
    metrics.elastic_actions.labels("pin").inc(len(done.pinned))
    metrics.elastic_actions.labels("repin").inc(len(done.repinned))
    metrics.elastic_waiting.set(done.waiting)
    if done.resized or done.moved or done.pinned or done.repinned:
        log.info(
            "elastic: resized %s, moved %s, pinned %s, re-pinned %s",
            done.resized,
            done.moved,
            done.pinned,
            done.repinned,
        )
