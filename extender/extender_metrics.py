"""Prometheus metrics of the extender, built against an injected registry (docs/design/style.md §12).

One gunicorn worker process (see README), so the plain, non-multiprocess registry is exact.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class GangMetrics:
    """Gang scheduling metrics."""

    time_to_bound: Histogram
    """``phalanx_gang_time_to_bound_seconds``: from a gang's first filter to its release to bind."""
    reservations: Gauge
    """``phalanx_gang_reservations``: gangs holding a reservation now."""
    barrier_timeouts: Counter
    """``phalanx_gang_barrier_timeouts_total``: gangs whose members did not all reach bind in time."""
    recoveries: Counter
    """``phalanx_gang_recoveries_total{action}``: gangs found with a plan after a restart, by how they ended
    (``bound``: nothing left to do, ``completed``, ``rolled_back``)."""

    @staticmethod
    def create(registry: CollectorRegistry) -> GangMetrics:
        """Register the metrics in ``registry``."""
        return GangMetrics(
            time_to_bound=Histogram(
                "phalanx_gang_time_to_bound_seconds",
                "Time from a gang's first filter until its members are released to bind together.",
                registry=registry,
                buckets=(0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 1800),
            ),
            reservations=Gauge(
                "phalanx_gang_reservations", "Gangs holding a reservation.", registry=registry
            ),
            barrier_timeouts=Counter(
                "phalanx_gang_barrier_timeouts", "Gangs whose bind barrier timed out.", registry=registry
            ),
            recoveries=Counter(
                "phalanx_gang_recoveries",
                "Gangs found with a bind plan after a restart, by how they ended.",
                ["action"],
                registry=registry,
            ),
        )


@dataclass(frozen=True, slots=True)
class ExtenderMetrics:
    """The extender's metrics."""

    request_seconds: Histogram
    """``phalanx_extender_request_duration_seconds{verb}``: time to answer one call."""
    requests: Counter
    """``phalanx_extender_requests_total{verb,outcome}``: ok, bad_request, error."""
    node_verdicts: Counter
    """``phalanx_extender_filter_nodes_total{result}``: per candidate node, feasible or why not."""
    binds: Counter
    """``phalanx_extender_binds_total{outcome}``: bound, already_bound, refused, ..."""
    filter_paths: Counter
    """``phalanx_extender_filter_answers_total{path}``: filter replies by what kube-scheduler does next:
    ``decisive`` (one node of several candidates, chosen by phalanx or a gang's reservation:
    kube-scheduler runs no Score plugin and no ``prioritize``), ``ranked`` (several nodes, for
    kube-scheduler's scores and ``prioritize``), ``single`` (kube-scheduler asked about one node only,
    e.g. a nominated or hinted node), ``none`` (no node)."""
    open_promises: Gauge
    """``phalanx_extender_open_promises``: GPUs chosen at bind not yet visible in the cache."""
    decisions_kept: Gauge
    """``phalanx_extender_decisions_kept``: turn-downs kept for ``/debug/decision`` (each pins a snapshot)."""
    python_blocks: Gauge
    """``phalanx_extender_python_allocated_blocks``: ``sys.getallocatedblocks()``, the objects the worker's
    Python heap holds: a leak grows it, while RSS also grows when a backlog peak leaves the allocator's
    arenas fragmented."""

    @staticmethod
    def create(registry: CollectorRegistry) -> ExtenderMetrics:
        """Register the metrics in ``registry``."""
        return ExtenderMetrics(
            request_seconds=Histogram(
                "phalanx_extender_request_duration_seconds",
                "Time to answer one extender call, by verb.",
                ["verb"],
                registry=registry,
                buckets=_LATENCY_BUCKETS,
            ),
            requests=Counter(
                "phalanx_extender_requests",
                "Extender calls by verb and outcome (ok, bad_request, error).",
                ["verb", "outcome"],
                registry=registry,
            ),
            node_verdicts=Counter(
                "phalanx_extender_filter_nodes",
                "Candidate nodes judged by filter, by result (feasible or the rejection reason).",
                ["result"],
                registry=registry,
            ),
            binds=Counter(
                "phalanx_extender_binds",
                "Bind calls by outcome.",
                ["outcome"],
                registry=registry,
            ),
            filter_paths=Counter(
                "phalanx_extender_filter_answers",
                "Filter replies by path: decisive, ranked, single or none.",
                ["path"],
                registry=registry,
            ),
            open_promises=Gauge(
                "phalanx_extender_open_promises",
                "Pods whose GPUs were chosen at bind but whose binding the cache has not shown yet.",
                registry=registry,
            ),
            decisions_kept=Gauge(
                "phalanx_extender_decisions_kept",
                "Filter turn-downs kept for /debug/decision; each pins the snapshot it read.",
                registry=registry,
            ),
            python_blocks=_blocks(registry),
        )


def _blocks(registry: CollectorRegistry) -> Gauge:
    gauge = Gauge(
        "phalanx_extender_python_allocated_blocks",
        "Memory blocks the Python heap holds now (sys.getallocatedblocks); grows with a leak.",
        registry=registry,
    )
    gauge.set_function(sys.getallocatedblocks)  # O(1), read at each scrape
    return gauge
