"""Section 5 (a): resident memory of the extender's cluster view at 5,000 nodes and 150,000 pods.

The full run also creates that many pods through the API server and reads the real gunicorn worker's
RSS (``perf.envelope``); this subprocess is the cross-check that isolates the cache, and the only
figure at that size in ``--quick`` mode. It builds the extender's real
``kubeio.cluster_cache.ClusterCache`` and feeds it node and pod objects shaped like the API's through
``replace_nodes``/``replace_pods``, exactly as the reflector does after a (paged) list: the whole list is
held while it is converted, then dropped. It reports ``VmRSS`` after the list is dropped (the steady
state) and ``VmHWM`` (the peak, during conversion), both from ``/proc/self/status``, plus the RSS of
the interpreter with the extender's modules imported and nothing loaded, for reference.

The pods: 8 one-GPU pods per node, bound, with ``phalanx.io/gpus`` (40,000 at 5,000 nodes), and the
rest CPU-only pods of the kind every node also runs (daemons, services), all ``Running``.

Worker: ``python -m perf.memory --nodes N --pods P`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from kubeio.cluster_cache import ClusterCache
from perf.bed import node_specs, topology_documents
from perf.common import Progress, proc_status, subprocess_env
from testbed.nodes import node_object, status_patch

GPU_PODS_PER_NODE = 8


def _node(i: int, documents: Sequence[str]) -> dict[str, Any]:
    spec = node_specs(i, i + 1, documents)[0]
    raw = node_object(spec)
    raw["metadata"].update(
        uid=f"node-uid-{i}", resourceVersion=str(1000 + i), creationTimestamp="2026-11-22T09:00:00Z"
    )
    raw["status"] = status_patch(spec, "2026-11-22T09:00:00Z")["status"]
    return raw


def api_pod(i: int, node: str, gpu: int | None) -> dict[str, Any]:
    """A bound, running pod as the API server lists it (managedFields are trimmed by the extender's list)."""
    requests: dict[str, str] = {"cpu": "500m", "memory": "1Gi"}
    annotations: dict[str, str] = {}
    if gpu is not None:
        requests = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}
        annotations["phalanx.io/gpus"] = str(gpu)
    name = f"pod-{i:06d}"
    return {
        "metadata": {
            "name": name,
            "namespace": f"team-{i % 200}",
            "uid": f"7d3c{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(50_000 + i),
            "creationTimestamp": "2026-11-22T09:10:00Z",
            "labels": {"app": f"app-{i % 1000}", "pod-template-hash": f"{i % 97:05x}"},
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"app-{i % 1000}",
                    "uid": f"rs-{i % 1000}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "phalanx" if gpu is not None else "default-scheduler",
            "containers": [
                {
                    "name": "main",
                    "image": "registry.example/train:1.0",
                    "resources": {"requests": requests, "limits": dict(requests)},
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        },
        "status": {
            "phase": "Running",
            "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
            "startTime": "2026-11-22T09:10:05Z",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-11-22T09:10:05Z"}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "qosClass": "Guaranteed",
        },
    }


def worker(nodes: int, pods: int) -> dict[str, Any]:
    """Build a ClusterCache with ``nodes`` nodes and ``pods`` pods; report RSS in KiB and seconds."""
    imported = proc_status(os.getpid())
    documents = topology_documents()
    cache = ClusterCache()
    raw_nodes = [_node(i, documents) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in raw_nodes]
    start = time.perf_counter()
    cache.replace_nodes(raw_nodes)
    node_seconds = time.perf_counter() - start
    del raw_nodes
    raw_pods = []
    for i in range(pods):
        node = names[i % nodes]
        slot = i // nodes
        raw_pods.append(api_pod(i, node, slot if slot < GPU_PODS_PER_NODE else None))
    start = time.perf_counter()
    cache.replace_pods(raw_pods)
    pod_seconds = time.perf_counter() - start
    del raw_pods
    gc.collect()
    snapshot = cache.snapshot()
    status = proc_status(os.getpid())
    return {
        "nodes": len(snapshot.nodes),
        "pods": len(cache.pods()),
        "nodes_with_usage": len(snapshot.usage),
        "rss_kib": status.get("VmRSS"),
        "peak_rss_kib": status.get("VmHWM"),
        "rss_after_imports_kib": imported.get("VmRSS"),
        "replace_nodes_seconds": round(node_seconds, 2),
        "replace_pods_seconds": round(pod_seconds, 2),
    }


def measure_cache_memory(
    nodes: int, pods: int, progress: Progress, timeout: float = 1200.0
) -> dict[str, Any]:
    """Run the worker in a fresh interpreter (so nothing else is in its RSS) and return its report."""
    progress(f"memory: ClusterCache with {nodes} nodes and {pods} pods in a subprocess")
    argv = [sys.executable, "-m", "perf.memory", "--nodes", str(nodes), "--pods", str(pods)]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=subprocess_env(), timeout=timeout, check=False
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    report: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    progress(f"  RSS {report['rss_kib'] / 1024:.0f} MiB, peak {report['peak_rss_kib'] / 1024:.0f} MiB")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the worker subprocess."""
    parser = argparse.ArgumentParser(description="RSS of a ClusterCache fed with API-shaped objects")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    args = parser.parse_args(argv)
    print(orjson.dumps(worker(args.nodes, args.pods)).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
