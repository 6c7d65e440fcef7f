"""Prometheus metrics of the placement manager, built against an injected registry (docs/design/style.md §12).

The per-queue GPU figures are not kept in gauges set after each pass: :class:`QueueGpus` holds the latest
queue view and turns it into samples when ``/metrics`` is scraped, so the figures always come from one
view and a deleted queue disappears instead of keeping its last values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.wait import size_class, waiting_gangs
from scheduling.gpu.fragmentation import gpu_fragmentation
from scheduling.queues.view import QueueView, pending_of
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


class ClusterFigures:
    """GPUs per node, how scattered the free ones are, and the gangs waiting, from the cache at scrape time.

    ``phalanx_node_gpus{node,kind}`` (total, allocated, free), ``phalanx_gpu_partial_nodes``,
    ``phalanx_gpu_largest_free_block``, ``phalanx_gangs_waiting{size}``,
    ``phalanx_gang_oldest_wait_seconds{size}`` and ``phalanx_gangs_past_timeout{size}`` (waiting longer
    than ``scheduleTimeoutSeconds``), sizes in power-of-two classes. The figures are the core's
    (``scheduling.gpu.fragmentation``, ``scheduling.gang.wait``); every replica reports them, a standby
    from its warm cache.
    """

    def __init__(self) -> None:
        self._source: tuple[Callable[[], ClusterSnapshot], Callable[[], float]] | None = None

    def show(self, snapshot: Callable[[], ClusterSnapshot], clock: Callable[[], float]) -> None:
        """Read ``snapshot()`` and the wall ``clock`` at every scrape from now on."""
        self._source = (snapshot, clock)

    def describe(self) -> Iterator[Metric]:
        """The metric families without samples, so the registry can refuse a clashing name."""
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        """The families with the samples of the cluster now (none before ``show``)."""
        nodes, partial, largest, waiting, oldest, late = families = self._families()
        if self._source is not None:
            snapshot, clock = self._source[0](), self._source[1]()
            figures = gpu_fragmentation(snapshot)
            for node in figures.nodes:
                nodes.add_metric([node.node, "total"], node.total)
                nodes.add_metric([node.node, "allocated"], node.allocated)
                nodes.add_metric([node.node, "free"], node.free)
            partial.add_metric([], figures.partial_nodes)
            largest.add_metric([], figures.largest_free_block)
            by_size: dict[str, list[float]] = {}
            past: dict[str, int] = {}
            for wait in waiting_gangs(snapshot, clock):
                label = size_class(wait.size)
                by_size.setdefault(label, []).append(wait.waited)
                past[label] = past.get(label, 0) + int(wait.past_timeout)
            for label, waits in sorted(by_size.items()):
                waiting.add_metric([label], len(waits))
                oldest.add_metric([label], max(waits))
                late.add_metric([label], past[label])
        yield from families

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "phalanx_node_gpus",
                "GPUs per node: total, allocated (held by live pods), free (for a new pod; 0 if unusable).",
                labels=["node", "kind"],
            ),
            GaugeMetricFamily("phalanx_gpu_partial_nodes", "Nodes with some but not all of their GPUs free."),
            GaugeMetricFamily("phalanx_gpu_largest_free_block", "The most free GPUs on one node."),
            GaugeMetricFamily(
                "phalanx_gangs_waiting", "Gangs waiting to be placed, by minMember class.", labels=["size"]
            ),
            GaugeMetricFamily(
                "phalanx_gang_oldest_wait_seconds",
                "The longest wait of a gang now waiting, by minMember class.",
                labels=["size"],
            ),
            GaugeMetricFamily(
                "phalanx_gangs_past_timeout",
                "Gangs waiting longer than their scheduleTimeoutSeconds, by minMember class.",
                labels=["size"],
            ),
        )


@dataclass(frozen=True, slots=True)
class PlacementMetrics:
    """The placement manager's metrics."""

    round_seconds: Histogram
    """``phalanx_placement_round_seconds``: duration of one placement round, every pass of it."""
    pass_seconds: Histogram
    """``phalanx_placement_pass_seconds{pass}``: duration of one pass of a round, by name
    (``placement.round``: gang, elastic, queue, refusal, gate bypass)."""
    pass_failures: Counter
    """``phalanx_placement_pass_failures_total{pass}``: passes that raised (the others went on)."""
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
    cluster: ClusterFigures
    """GPUs per node, fragmentation and waiting gangs, read from the cache at scrape time."""
    admission_groups: Counter
    """``phalanx_admission_groups``: groups the release pass ungated (``released``), let in ungated as
    they were created (``released_at_creation``: the door, ``scheduling.admission.door``) or whose ungate
    patch was refused (``refused``: the pod changed; decided again next pass)."""
    admission_kept: Gauge
    """``phalanx_admission_groups_gated``: groups kept gated after the last release pass."""
    admission_in_flight_gpus: Gauge
    """``phalanx_admission_in_flight_gpus``: GPUs released and not bound yet after the last pass."""
    admission_pass_seconds: Histogram
    """``phalanx_admission_pass_seconds``: duration of one release pass, deciding and ungating."""
    admission_decide_seconds: Histogram
    """``phalanx_admission_decide_seconds``: the deciding part of a release pass (one snapshot, the core)."""
    admission_idle_gpus: Gauge
    """``phalanx_admission_idle_gpus{rule}``: GPUs free while groups wait gated after the last pass, by the
    rule that keeps them waiting (``scheduling.admission.outcome.KeptRule`` values, and ``in_flight``)."""
    webhook_trusted: Gauge
    """``phalanx_webhook_trusted{configuration,webhook}``: 1 while the API server can call the webhook (its
    caBundle verifies this replica's certificate), 0 while it cannot (``placement.webhook_watch``)."""
    gate_bypassed: Counter
    """``phalanx_gate_bypassed_pods_total``: pods of scheduler phalanx created around the admission gate
    (``placement.bypass_pass``)."""

    @staticmethod
    def create(registry: CollectorRegistry) -> PlacementMetrics:
        """Register the metrics in ``registry``."""
        queue_gpus, cluster = QueueGpus(), ClusterFigures()
        registry.register(queue_gpus)
        registry.register(cluster)
        return PlacementMetrics(
            round_seconds=Histogram(
                "phalanx_placement_round_seconds", "Duration of one placement round.", registry=registry
            ),
            pass_seconds=Histogram(
                "phalanx_placement_pass_seconds",
                "Duration of one pass of a placement round, by pass.",
                ["pass"],
                registry=registry,
            ),
            pass_failures=Counter(
                "phalanx_placement_pass_failures",
                "Passes of a placement round that raised (the other passes went on), by pass.",
                ["pass"],
                registry=registry,
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
            cluster=cluster,
            admission_groups=Counter(
                "phalanx_admission_groups",
                "Groups the release pass ungated (released), let in as created (released_at_creation) "
                "or whose patch was refused (refused).",
                ["outcome"],
                registry=registry,
            ),
            admission_kept=Gauge(
                "phalanx_admission_groups_gated",
                "Groups kept gated after the last release pass.",
                registry=registry,
            ),
            admission_in_flight_gpus=Gauge(
                "phalanx_admission_in_flight_gpus",
                "GPUs released from the admission gate and not bound yet.",
                registry=registry,
            ),
            admission_pass_seconds=Histogram(
                "phalanx_admission_pass_seconds", "Duration of one release pass.", registry=registry
            ),
            admission_decide_seconds=Histogram(
                "phalanx_admission_decide_seconds",
                "Duration of the deciding part of one release pass (before ungating).",
                registry=registry,
            ),
            admission_idle_gpus=Gauge(
                "phalanx_admission_idle_gpus",
                "GPUs free while groups wait gated, by the rule that keeps them waiting.",
                ["rule"],
                registry=registry,
            ),
            webhook_trusted=Gauge(
                "phalanx_webhook_trusted",
                "1 while the API server can call the webhook (its caBundle verifies this replica), else 0.",
                ["configuration", "webhook"],
                registry=registry,
            ),
            gate_bypassed=Counter(
                "phalanx_gate_bypassed_pods",
                "Pods of scheduler phalanx created around the admission gate webhook.",
                registry=registry,
            ),
        )
