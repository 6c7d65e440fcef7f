from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import pytest
from prometheus_client import CollectorRegistry

from kubeio.render import queue_status
from placement.placement_metrics import PlacementMetrics
from scheduling.cluster.promises import PromiseBook
from scheduling.queues import Queue, ResourceQuota
from scheduling.queues.view import QueueView, build_queue_view
from tests.builders import a_gang, a_node, a_pod, snapshot_of

QUEUES = [
    Queue("team", gpu=ResourceQuota(8, 1)),
    Queue("a", parent="team", gpu=ResourceQuota(4, 1)),
    Queue("b", parent="team", gpu=ResourceQuota(4, 1)),
]


def a_view(queues: list[Queue]) -> QueueView:
    running = replace(a_pod("r").gpus(2).on("n0", range(2)).build(), labels={"phalanx.io/queue": "a"})
    waiting = [
        replace(a_pod(f"{q}{i}").gpus(8).build(), labels={"phalanx.io/queue": q})
        for q in ("a", "b")
        for i in (0, 1)
    ]
    return build_queue_view(queues, [a_node("n0").build()], [running, *waiting], PromiseBook())


def gpus(registry: CollectorRegistry, queue: str, kind: str) -> float | None:
    return registry.get_sample_value("phalanx_queue_gpus", {"queue": queue, "kind": kind})


def test_queue_gpus_come_from_the_latest_view_at_scrape_time() -> None:
    registry = CollectorRegistry()
    metrics = PlacementMetrics.create(registry)
    assert gpus(registry, "a", "pending") is None, "no view yet, no samples"
    view = a_view(QUEUES)
    metrics.queue_gpus.show(view)
    assert gpus(registry, "a", "allocated") == 2
    assert gpus(registry, "team", "allocated") == 2
    assert gpus(registry, "team", "deserved") == view.shares["team"].deserved.gpus
    assert gpus(registry, "a", "fair_share") == view.shares["a"].fair_share.gpus
    metrics.queue_gpus.show(a_view(QUEUES[:2]))
    assert gpus(registry, "b", "allocated") is None, "a deleted queue disappears"


@pytest.mark.parametrize("queue", ["team", "a", "b"])
def test_pending_gpus_match_the_queue_status_parent_included(queue: str) -> None:
    registry = CollectorRegistry()
    metrics = PlacementMetrics.create(registry)
    view = a_view(QUEUES)
    metrics.queue_gpus.show(view)
    assert gpus(registry, queue, "pending") == queue_status(view, queue)["gpu"]["pending"]
    assert gpus(registry, "team", "pending") == 32


def test_the_counters_and_the_pass_histogram_are_registered() -> None:
    registry = CollectorRegistry()
    metrics = PlacementMetrics.create(registry)
    metrics.stale_gang_evictions.inc()
    metrics.reclaims.labels("a").inc()
    metrics.round_seconds.observe(0.1)
    assert registry.get_sample_value("phalanx_stale_gang_evictions_total") == 1
    assert registry.get_sample_value("phalanx_reclaims_total", {"queue": "a"}) == 1
    assert registry.get_sample_value("phalanx_placement_round_seconds_count") == 1


def test_cluster_figures_come_from_the_snapshot_at_scrape_time() -> None:
    registry = CollectorRegistry()
    metrics = PlacementMetrics.create(registry)
    assert registry.get_sample_value("phalanx_gpu_partial_nodes") is None, "nothing shown yet"
    made = "2030-01-01T00:00:00Z"
    held = a_pod("held").gpus(3).on("n0", range(3)).phase("Running").build()
    waiting = [a_pod(f"w{i}").gpus(8).group("g").created(made).build() for i in range(4)]
    cluster = [snapshot_of([a_node("n0").build(), a_node("n1").build()], [held])]
    now = [datetime.fromisoformat(made).timestamp() + 30]
    metrics.cluster.show(lambda: cluster[0], lambda: now[0])
    sample = registry.get_sample_value
    assert sample("phalanx_node_gpus", {"node": "n0", "kind": "allocated"}) == 3
    assert sample("phalanx_node_gpus", {"node": "n0", "kind": "free"}) == 5
    assert sample("phalanx_gpu_partial_nodes") == 1
    assert sample("phalanx_gpu_largest_free_block") == 8
    assert sample("phalanx_gangs_waiting", {"size": "3-4"}) is None
    cluster[0] = snapshot_of([a_node("n0").build()], [held, *waiting], [a_gang("g", 4, timeout=60)])
    assert sample("phalanx_gangs_waiting", {"size": "3-4"}) == 1
    assert sample("phalanx_gang_oldest_wait_seconds", {"size": "3-4"}) == 30
    assert sample("phalanx_gangs_past_timeout", {"size": "3-4"}) == 0
    now[0] += 60
    assert sample("phalanx_gangs_past_timeout", {"size": "3-4"}) == 1
    assert sample("phalanx_node_gpus", {"node": "n1", "kind": "total"}) is None, "a deleted node disappears"
