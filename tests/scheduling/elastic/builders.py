"""Elastic jobs for the planner's tests: workers by replica index, placed on nodes or waiting."""

from __future__ import annotations

from collections.abc import Sequence

from scheduling.elastic import ElasticJob
from scheduling.model import Pod, Resources
from tests.builders import a_pod


def a_job(
    name: str,
    on: Sequence[str | None],
    *,
    queue: str = "q",
    low: int = 1,
    high: int = 8,
    gpus: int = 2,
    created: str = "",
) -> ElasticJob:
    """Job ``ml/name`` with one worker per entry of ``on``: a node name (running there) or None (waiting)."""
    workers: list[Pod] = []
    for index, node in enumerate(on):
        pod = a_pod(f"{name}-worker-{index}").gpus(gpus).group(name)
        workers.append((pod.on(node) if node is not None else pod).build())
    return ElasticJob(f"ml/{name}", queue, low, high, Resources(gpus=gpus), tuple(workers), created or name)
