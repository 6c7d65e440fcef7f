from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import CollectorRegistry

from kubeio.render import queue_status
from placement.metrics import PlacementMetrics
from scheduling.promises import PromiseBook
from scheduling.queue_view import QueueView, build_queue_view
from scheduling.queues import Queue, ResourceQuota
from tests.builders import a_node, a_pod

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
    return build_queue_view(queues, None, [a_node("n0").build()], [running, *waiting], PromiseBook())


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
    metrics.pass_seconds.observe(0.1)
    assert registry.get_sample_value("phalanx_stale_gang_evictions_total") == 1
    assert registry.get_sample_value("phalanx_reclaims_total", {"queue": "a"}) == 1
    assert registry.get_sample_value("phalanx_placement_pass_seconds_count") == 1
