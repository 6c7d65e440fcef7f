"""Leak check: Python heap growth of the extender's cache and queue view under pod churn (prints figures).

The soak (``hack/soak``) reports process RSS, which also grows when the backlog reaches a new peak: the
allocator keeps the memory a peak needed. This separates the two. It feeds the real ``ClusterCache`` (the
one the extender and the placement manager run) 64 nodes and then, cycle after cycle, 500 new pods that
are added, bound and deleted, building the queue view after each step, as the extender does; after a
warm-up it measures, with ``tracemalloc``, what the Python heap holds more after ``--cycles`` cycles
than before, and the lines that hold it. A leak per pod shows as growth proportional to the pods churned.
Run: ``.venv/bin/python hack/churn_memory.py [--cycles 40] [--pods 500]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubeio.cluster_cache import ClusterCache
from scheduling.cluster.promises import PromiseBook
from scheduling.queues import QueueTree
from scheduling.queues.view import view_of

NODES = 64


def node(i: int) -> dict[str, Any]:
    allocatable = {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "pods": "110"}
    return {
        "metadata": {"name": f"n{i}", "uid": f"node-{i}", "labels": {}},
        "spec": {},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": "True"}]},
    }


def pod(i: int, *, bound: bool) -> dict[str, Any]:
    meta = {
        "name": f"p{i}",
        "namespace": "churn",
        "uid": f"pod-{i}",
        "labels": {"phalanx.io/queue": "team-a"},
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "resourceVersion": str(i),
    }
    spec: dict[str, Any] = {
        "schedulerName": "phalanx",
        "containers": [{"name": "main", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "1"}}}],
    }
    if bound:
        spec["nodeName"] = f"n{i % NODES}"
        meta["annotations"] = {"phalanx.io/gpus": str(i % 8)}
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running" if bound else "Pending"}}


class Churn:
    """The cache and the last queue tree, fed one cycle at a time."""

    def __init__(self, pods: int) -> None:
        self.cache = ClusterCache()
        self.cache.replace_nodes([node(i) for i in range(NODES)])
        self.cache.replace_pods([])
        self.pods = pods
        self.tree: QueueTree | None = None

    def view(self) -> None:
        """Build the queue view from a fresh snapshot, as the extender's view keeper does."""
        self.tree = view_of(self.cache.snapshot(), PromiseBook()).tree

    def cycle(self, n: int) -> None:
        """Cycle ``n``: its pods are added (pending), then bound, then deleted."""
        numbers = range(n * self.pods, (n + 1) * self.pods)
        for i in numbers:
            self.cache.pod_event("ADDED", pod(i, bound=False))
        self.view()
        for i in numbers:
            self.cache.pod_event("MODIFIED", pod(i, bound=True))
        self.view()
        for i in numbers:
            self.cache.pod_event("DELETED", pod(i, bound=True))
        self.view()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=40)
    parser.add_argument("--pods", type=int, default=500)
    args = parser.parse_args()
    churn = Churn(args.pods)
    for n in range(5):  # warm-up: caches of node-sized things fill once
        churn.cycle(n)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for n in range(5, 5 + args.cycles):
        churn.cycle(n)
    gc.collect()
    stats = tracemalloc.take_snapshot().compare_to(before, "lineno")
    growth = sum(s.size_diff for s in stats)
    churned = args.cycles * args.pods
    print(f"{churned} pods added, bound and deleted on {NODES} nodes after a warm-up of {5 * args.pods}")
    print(f"Python heap growth: {growth / 1024:.1f} KiB ({growth / churned:.1f} bytes per pod churned)")
    for stat in stats[:5]:
        print(f"  {stat}")


if __name__ == "__main__":
    main()
