"""Small builders for queue tests: GPU-only queues, gangs and groups in one line each."""

from __future__ import annotations

from collections.abc import Mapping

from scheduling.model import Pod, Resources
from scheduling.queues.fair_share import fair_shares
from scheduling.queues.ordering import QueueState, queue_states
from scheduling.queues.queue_tree import Queue, QueueTree, ResourceQuota
from scheduling.queues.workloads import PendingGroup, RunningGang
from tests.builders import a_pod


def gpu_queue(
    name: str,
    quota: int = 0,
    weight: int = 1,
    limit: int | None = None,
    parent: str | None = None,
    *,
    min_runtime: int | None = None,
    created: str = "",
) -> Queue:
    """A queue with a GPU quota, weight and limit; CPU and memory left at the defaults."""
    return Queue(
        name,
        parent,
        gpu=ResourceQuota(quota, weight, limit),
        min_runtime_seconds=min_runtime,
        created=created,
    )


def gpus(n: int) -> Resources:
    return Resources(gpus=n)


def group(
    key: str,
    queue: str,
    n_gpus: int,
    *,
    priority: int = 0,
    created: str = "2026-01-01T00:00:00Z",
    preemptible: bool = True,
) -> PendingGroup:
    return PendingGroup(f"ml/{key}", queue, gpus(n_gpus), priority, created, preemptible)


def gang(
    key: str,
    queue: str,
    n_gpus: int,
    *,
    priority: int = 0,
    started_at: float = 0.0,
    preemptible: bool = True,
) -> RunningGang:
    return RunningGang(f"ml/{key}", queue, gpus(n_gpus), preemptible, priority, started_at)


def states_for(
    queues: list[Queue],
    capacity: int,
    demand: dict[str, int],
    allocated: dict[str, int],
    non_preemptible: dict[str, int] | None = None,
) -> Mapping[str, QueueState]:
    """Queue states from GPU numbers: build the tree, divide ``capacity`` by ``demand``, add allocations."""
    tree = QueueTree.build(queues)
    shares = fair_shares(tree, gpus(capacity), {q: gpus(n) for q, n in demand.items()})
    held = {q: gpus(n) for q, n in allocated.items()}
    pinned = {q: gpus(n) for q, n in (non_preemptible or {}).items()}
    return queue_states(tree, shares, held, pinned)


def gang_pods(name: str, queue: str, node: str | None, *, size: int = 2, gpus: int = 4) -> list[Pod]:
    """``size`` member pods of gang ``name`` in ``queue``, side by side on ``node`` or pending."""
    pods = []
    for i in range(size):
        pod = a_pod(f"{name}-{i}").gpus(gpus).group(name).queue(queue)
        if node is not None:
            pod = pod.on(node, range(i * gpus, (i + 1) * gpus))
        pods.append(pod.build())
    return pods
