"""Prometheus metrics of the placement manager, built against an injected registry (style.md house rule 12).

The per-queue GPU figures are not kept in gauges set after each pass: :class:`QueueGpus` holds the latest
queue view and turns it into samples when ``/metrics`` is scraped, so the figures always come from one
view and a deleted queue disappears instead of keeping its last values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from scheduling.queue_view import QueueView, pending_of
from scheduling.resources import GPU, amount


class QueueGpus:
    """``phalanx_queue_gpus{queue,kind}``: allocated, deserved, fair share and pending GPUs per queue.

    A prometheus collector: ``show`` swaps in the latest view (a frozen value), ``collect`` reads it at
    scrape time. Pending counts the queue's whole subtree, as the Queue status does (``pending_of``).
    """

    def __init__(self) -> None:
        self._view: QueueView | None = None

    def show(self, view: QueueView | None) -> None:
        """Report ``view`` from now on (``None``: no queue figures yet)."""
        self._view = view

    def describe(self) -> Iterator[Metric]:
        """The metric family without samples, so the registry can refuse a clashing name."""
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        """The family with four samples per queue of the latest view."""
        family, view = self._family(), self._view
        if view is not None:
            for name, state in view.states.items():
                share = view.shares[name]
                family.add_metric([name, "allocated"], amount(state.allocated, GPU))
                family.add_metric([name, "deserved"], amount(share.deserved, GPU))
                family.add_metric([name, "fair_share"], amount(share.fair_share, GPU))
                family.add_metric([name, "pending"], amount(pending_of(view, name), GPU))
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "phalanx_queue_gpus",
            "GPUs per queue: allocated, deserved, fair share, pending.",
            labels=["queue", "kind"],
        )


@dataclass(frozen=True, slots=True)
class PlacementMetrics:
    """The placement manager's metrics."""

    pass_seconds: Histogram
    """``phalanx_placement_pass_seconds``: duration of one reconcile pass."""
    stale_gang_evictions: Counter
    """``phalanx_stale_gang_evictions_total``: gangs evicted whole for running below ``minMember``."""
    reclaims: Counter
    """``phalanx_reclaims_total{queue}``: gangs evicted to give a queue its fair share back, by victim."""
    queue_gpus: QueueGpus
    """``phalanx_queue_gpus{queue,kind}``: GPUs per queue from the latest queue view."""
    elastic_actions: Counter
    """``phalanx_elastic_actions_total{action}``: elastic resizes (grow, shrink), moves, pins by the pass
    (pin) and at creation by the webhook (pin_at_creation), and stale pins re-made (repin)."""
    elastic_waiting: Gauge
    """``phalanx_elastic_workers_waiting``: elastic workers waiting for a node after the last pass."""
    leader: Gauge
    """``phalanx_placement_leader``: 1 while this replica holds the Lease and acts, else 0."""

    @staticmethod
    def create(registry: CollectorRegistry) -> PlacementMetrics:
        """Register the metrics in ``registry``."""
        queue_gpus = QueueGpus()
        registry.register(queue_gpus)
        return PlacementMetrics(
            pass_seconds=Histogram(
                "phalanx_placement_pass_seconds", "Duration of one reconcile pass.", registry=registry
            ),
            stale_gang_evictions=Counter(
                "phalanx_stale_gang_evictions",
                "Gangs evicted whole for running below minMember.",
                registry=registry,
            ),
            reclaims=Counter(
                "phalanx_reclaims",
                "Gangs evicted to give a queue its fair share back, by victim queue.",
                ["queue"],
                registry=registry,
            ),
            queue_gpus=queue_gpus,
            elastic_actions=Counter(
                "phalanx_elastic_actions",
                "Elastic MPIJob actions: grow, shrink, move, pin.",
                ["action"],
                registry=registry,
            ),
            elastic_waiting=Gauge(
                "phalanx_elastic_workers_waiting",
                "Elastic workers waiting for a node (pinned or not) after the last pass.",
                registry=registry,
            ),
            leader=Gauge(
                "phalanx_placement_leader",
                "1 while this replica of the placement manager holds its Lease and acts, else 0.",
                registry=registry,
            ),
        )
