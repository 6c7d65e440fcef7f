"""Section 5 (b): the real extender at the envelope, pods created through the API server.

At the largest node count, pods already bound to their nodes (``spec.nodeName`` set at creation, as a
kubelet-run static workload or another scheduler's pods would be) are created through the API server
until the cluster holds ``pods_per_node`` per node: a tenth of them (at most 7) plus one are one-GPU pods
with ``phalanx.io/gpus``, the rest CPU-only, the same pod shape as the ClusterCache subprocess uses
(``perf.memory.api_pod``). No scheduler
decides anything here; the point is what the running extender holds. Once its cache shows the pods
and the machine has settled, the gunicorn worker's RSS is read, and the per-call latency of
``filter`` and ``prioritize`` is measured again with that many pods in the cache.

The fill goes in two stages so that the per-call cost can be compared across pod counts (the goal: the
same at 150,000 pods as at 15,000): first a tenth of the pods (one-GPU pods only, so the cache has seen
them all once no node has room for a pod of the GPUs left plus one), calls timed; then the rest, CPU-only
pods and one more one-GPU pod per node last, calls timed again. GPUs stay free on every node in both
stages, so the calls are the same kind of decision (every node passes) with ten times the pods.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from workload import create_pod

from perf.bed import BenchBed
from perf.common import Progress, cpu_by_role, wait_for_idle_cpu
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


def _wait_no_node_fits(bb: BenchBed, gpus: int, timeout: float) -> bool:
    """Wait until a filter for a ``gpus``-GPU pod finds no node with room (the cache saw the pods)."""
    body = orjson.dumps(
        {"Pod": probe_pod("perf-envelope-probe", gpus), "Nodes": None, "NodeNames": bb.node_names}
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not post_json(f"{bb.extender_url}/filter", body).get("NodeNames"):
            return True
        time.sleep(5.0)
    return False


def _create(bb: BenchBed, namespace: str, slots: list[int], progress: Progress) -> float:
    """Create, on every node, one pod per slot (slot < 8: a one-GPU pod on that GPU); seconds taken."""
    nodes = len(bb.node_names)
    work = [(slot, n) for slot in slots for n in range(nodes)]
    done = 0
    lock = threading.Lock()

    def one(item: tuple[int, int]) -> None:
        nonlocal done
        slot, n = item
        i = slot * nodes + n
        gpu = slot if slot < GPU_PODS_PER_NODE else None
        create_pod(bb.http, namespace, _for_api(i, bb.node_names[n], gpu, namespace))
        with lock:
            done += 1
            if done % 10000 == 0:
                progress(f"  created {done:,}/{len(work):,} pods")

    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, work))
    return time.monotonic() - started


STEADY_SECONDS = 10.0
"""How long each stage's per-process CPU is sampled once the machine settled (nothing is changing)."""


def _steady_cpu(bb: BenchBed, progress: Progress) -> dict[str, float]:
    """Per cent of a core each component uses while the cluster holds the pods and nothing changes."""
    shares = cpu_by_role(bb.processes(), STEADY_SECONDS)
    progress("  steady CPU, % of a core: " + ", ".join(f"{role} {share}" for role, share in shares.items()))
    return shares


def fill_and_measure(bb: BenchBed, pods_per_node: int, calls: int, progress: Progress) -> dict[str, Any]:
    """Create the pods in two stages; after each, wait for the extender to hold them and time its calls."""
    namespace = bb.namespace("perf-envelope")
    nodes = len(bb.node_names)
    first = max(1, min(pods_per_node // 10, GPU_PODS_PER_NODE - 1))
    progress(f"envelope: creating {nodes * first:,} bound one-GPU pods ({first} per node) through the API")
    created = _create(bb, namespace, list(range(first)), progress)
    tenth: dict[str, Any] = {"pods": nodes * first}
    tenth["extender_saw_all_pods"] = _wait_no_node_fits(bb, GPU_PODS_PER_NODE - first + 1, timeout=900.0)
    settled = wait_for_idle_cpu(progress, what="the envelope's first stage")
    tenth["settle_seconds"] = round(settled.seconds, 1)
    if settled.busy:
        tenth["disturbed"] = settled.busy_note("its calls")
    tenth["steady_cpu"] = _steady_cpu(bb, progress)
    tenth["calls"] = measure_calls(bb.extender_url, bb.node_names, calls, progress)

    # The rest: CPU-only pods, then one more one-GPU pod per node, last, so that once no node has room
    # for a pod of the GPUs left plus one the cache has seen (nearly) all pods. GPUs stay free on every
    # node, so both stages' calls decide the same kind of request: every node passes.
    cpu_only = range(GPU_PODS_PER_NODE, GPU_PODS_PER_NODE + pods_per_node - first - 1)
    rest = [*cpu_only, first]
    total = nodes * (first + len(rest))  # pods_per_node, or first + 1 when that is fewer
    progress(f"envelope: creating {nodes * len(rest):,} more bound pods, {pods_per_node} per node in all")
    created += _create(bb, namespace, rest, progress)
    result: dict[str, Any] = {
        "nodes": nodes,
        "pods": total,
        "create_seconds": round(created, 1),
        "created_per_second": round(total / created, 1),
        "first_stage": tenth,
    }
    progress(f"envelope: created in {created:.0f} s; waiting for the extender's cache and the machine")
    result["extender_saw_all_gpu_pods"] = _wait_no_node_fits(bb, GPU_PODS_PER_NODE - first, timeout=900.0)
    settled = wait_for_idle_cpu(progress, what="the envelope", timeout=900.0)
    result["settle_seconds"] = round(settled.seconds, 1)
    if settled.busy:
        result["disturbed"] = settled.busy_note("its calls")
    result["steady_cpu"] = _steady_cpu(bb, progress)
    rss = bb.extender_rss_kib()
    result["rss_kib"], result["peak_rss_kib"] = rss.get("VmRSS", 0), rss.get("VmHWM", 0)
    progress(f"envelope: extender worker RSS {result['rss_kib'] / 1024:.0f} MiB")
    result["calls"] = measure_calls(bb.extender_url, bb.node_names, calls, progress)
    return result


def steady_cpu_table(envelope: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: per cent of a core each component used while the pods sat still, per stage."""
    stages = [(envelope.get("first_stage") or {}), envelope]
    sampled = [(stage["pods"], stage["steady_cpu"]) for stage in stages if stage.get("steady_cpu")]
    roles = sorted({role for _, shares in sampled for role in shares})
    rows = [[f"{pods:,}", *(f"{shares.get(role, 0.0):.1f}" for role in roles)] for pods, shares in sampled]
    return ["pods", *roles], rows
