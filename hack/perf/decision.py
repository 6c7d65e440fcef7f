"""The per-decision cost of ``filter`` in-process, decisive and ranked, at 5,000 nodes and 150,000 pods.

Issue 26's item 2 asks for a ranking that costs O(changed nodes) per pod: p99 <= 0.3 ms for a one-GPU
pod's whole decision at 5,000 candidates and 150,000 pods. This section times exactly that call, the
service's ``filter`` (``extender.service.Extender.filter``: health, queue hold, fit, and in decisive
mode the choice of the one node), on the extender's real ``ClusterCache`` fed as the reflector feeds
it (``perf.memory``'s API-shaped objects; node ``i`` runs ``i % 8`` one-GPU pods, so every node has room
and the nodes differ). Between two decisions one more pod is bound on one node through the cache's pod
event, as a backlog binds them, so the memos see one changed node per decision, not none; after each
event the extender's collector settles, as its watch thread does (``kubeio.collector``). Every call
passes the same candidate tuple, as the hot path does for a candidate list it read before
(``extender.hot.NamesMemo``); a new list costs one set of its names more (about 0.1 ms at 5,000).

The ranked mode also times ``prioritize`` over the feasible nodes, the second call a ranked pod costs
(before its HTTP exchange and kube-scheduler's own Score plugins, which are not in this figure).

Worker: ``python -m perf.decision --nodes N --pods P --calls C`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from extender.service import Extender
from kubeio.cluster_cache import ClusterCache
from kubeio.collector import Collector
from kubeio.convert import pod_from_api
from perf.bed import topology_documents
from perf.common import Progress, subprocess_env
from perf.memory import _node, api_pod
from perf.requests import probe_pod

GOAL_P99_MS = 0.3
"""Issue 26: p99 of one one-GPU pod's decision, in-process, at 5,000 nodes and 150,000 pods."""


def _cache(nodes: int, pods: int) -> tuple[ClusterCache, list[str]]:
    documents = topology_documents()
    cache = ClusterCache()
    raw_nodes = [_node(i, documents) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in raw_nodes]
    cache.replace_nodes(raw_nodes)
    raw_pods = []
    for i in range(pods):
        at, slot = i % nodes, i // nodes
        raw_pods.append(api_pod(i, names[at], slot if slot < at % 8 else None))
    cache.replace_pods(raw_pods)
    return cache, names


def worker(nodes: int, pods: int, calls: int) -> dict[str, Any]:
    """Time ``calls`` filter decisions per mode; one more pod is bound between two decisions."""
    cache, names = _cache(nodes, pods)
    candidates = tuple(names)
    pod = pod_from_api(probe_pod("perf-decision", 1))
    out: dict[str, Any] = {"nodes": nodes, "pods": pods, "calls": calls}
    extra = pods
    gc.collect()
    collector = Collector(time.monotonic)
    for mode in ("decisive", "ranked"):
        service = Extender(cache, None, clock=time.monotonic, promise_ttl=60.0, decisive=mode == "decisive")  # type: ignore[arg-type]
        times, ranking = [], []
        for n in range(calls + 20):
            at = (n * 7919) % nodes
            cache.pod_event("ADDED", api_pod(extra, names[at], None))
            collector.settle()
            extra += 1
            start = time.perf_counter()
            decision = service.filter(pod, candidates)
            took = time.perf_counter() - start
            if mode == "ranked":  # the ranked path's second call, which a decided pod never gets
                start = time.perf_counter()
                service.prioritize(pod, decision.feasible)
                if n >= 20:
                    ranking.append((time.perf_counter() - start) * 1000)
            if n >= 20:  # the first calls fill the memos
                times.append(took * 1000)
        out[mode] = {**percentiles(times), "feasible": len(decision.feasible)}
        if ranking:
            out[mode]["prioritize"] = percentiles(ranking)
    return out


def percentiles(times: list[float]) -> dict[str, float]:
    """p50 and p99 of ``times`` (ms), as the in-process sections report them (``perf.door`` too)."""
    times = sorted(times)
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
    }


def measure_decision(
    nodes: int, pods: int, calls: int, progress: Progress, timeout: float = 1200.0
) -> dict[str, Any]:
    """Run the worker in a fresh interpreter and return its report (or the error)."""
    progress(f"decision: filter in-process at {nodes} nodes and {pods} pods, {calls} calls per mode")
    argv = [
        sys.executable,
        "-m",
        "perf.decision",
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--calls",
        str(calls),
    ]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=subprocess_env(), timeout=timeout, check=False
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    report: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    for mode in ("decisive", "ranked"):
        progress(f"  {mode}: p50 {report[mode]['p50_ms']:.2f} ms, p99 {report[mode]['p99_ms']:.2f} ms")
    ranking = report["ranked"].get("prioritize") or {}
    progress(f"  ranked path's prioritize: p50 {ranking.get('p50_ms')} ms, p99 {ranking.get('p99_ms')} ms")
    return report


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the worker subprocess."""
    parser = argparse.ArgumentParser(description="in-process cost of one filter decision")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--pods", type=int, required=True)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args(argv)
    print(orjson.dumps(worker(args.nodes, args.pods, args.calls)).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
