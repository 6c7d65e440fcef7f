"""Section 5 (b): the real extender at the envelope, pods created through the API server.

At the largest node count, pods already bound to their nodes (``spec.nodeName`` set at creation, as a
kubelet-run static workload or another scheduler's pods would be) are created through the API server
until the cluster holds ``pods_per_node`` per node: 8 one-GPU pods with ``phalanx.io/gpus`` and the rest
CPU-only, the same shape as the ClusterCache subprocess uses (``perf.memory.api_pod``). No scheduler
decides anything here; the point is what the running extender holds. Once its cache shows every GPU
taken and the machine has settled, the gunicorn worker's RSS is read, and the per-call latency of
``filter`` and ``prioritize`` is measured again with that many pods in the cache.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from workload import create_pod

from perf.bed import BenchBed
from perf.common import Progress, wait_for_idle_cpu
from perf.extender_calls import measure_calls
from perf.memory import GPU_PODS_PER_NODE, api_pod
from perf.requests import post_json, probe_pod

API_FIELDS = ("name", "namespace", "labels", "annotations")
"""Metadata the harness sets; the API server fills in uid, resourceVersion and timestamps."""


def _for_api(i: int, node: str, gpu: int | None, namespace: str) -> dict[str, Any]:
    pod = api_pod(i, node, gpu)
    pod["metadata"] = {k: v for k, v in pod["metadata"].items() if k in API_FIELDS}
    pod["metadata"]["namespace"] = namespace
    pod["metadata"]["name"] = f"env-{i:06d}"
    del pod["status"]
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    return pod


def _wait_all_gpus_taken(bb: BenchBed, timeout: float) -> bool:
    """Wait until a filter for a one-GPU pod finds no node with a free GPU (the cache saw every pod)."""
    body = orjson.dumps(
        {"Pod": probe_pod("perf-envelope-probe", 1), "Nodes": None, "NodeNames": bb.node_names}
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not post_json(f"{bb.extender_url}/filter", body).get("NodeNames"):
            return True
        time.sleep(5.0)
    return False


def fill_and_measure(bb: BenchBed, pods_per_node: int, calls: int, progress: Progress) -> dict[str, Any]:
    """Create the pods, wait for the extender to hold them, then read its RSS and time its calls."""
    namespace = bb.namespace("perf-envelope")
    nodes = len(bb.node_names)
    total = nodes * pods_per_node
    progress(f"envelope: creating {total:,} bound pods ({pods_per_node} per node) through the API server")
    done = 0
    lock = threading.Lock()

    def one(i: int) -> None:
        nonlocal done
        # GPU pods last: once the extender's cache shows every GPU taken, it has seen (nearly) all pods.
        node, slot = bb.node_names[i % nodes], pods_per_node - 1 - i // nodes
        create_pod(
            bb.http, namespace, _for_api(i, node, slot if slot < GPU_PODS_PER_NODE else None, namespace)
        )
        with lock:
            done += 1
            if done % 10000 == 0:
                progress(f"  created {done:,}/{total:,} pods")

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(total)))
    created = time.monotonic() - started
    result: dict[str, Any] = {
        "nodes": nodes,
        "pods": total,
        "create_seconds": round(created, 1),
        "created_per_second": round(total / created, 1),
    }
    progress(f"envelope: created in {created:.0f} s; waiting for the extender's cache and the machine")
    result["extender_saw_all_gpu_pods"] = _wait_all_gpus_taken(bb, timeout=900.0)
    result["settle_seconds"] = round(wait_for_idle_cpu(progress, what="the envelope", timeout=900.0), 1)
    rss = bb.extender_rss_kib()
    result["rss_kib"], result["peak_rss_kib"] = rss.get("VmRSS", 0), rss.get("VmHWM", 0)
    progress(f"envelope: extender worker RSS {result['rss_kib'] / 1024:.0f} MiB")
    result["calls"] = measure_calls(bb.extender_url, bb.node_names, calls, progress)
    return result
