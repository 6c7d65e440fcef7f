"""Benchmark: ``prioritize`` latency with topology scoring over 1,000 candidate 8-GPU nodes.

Not a test: it prints figures. The extender app is the real one (Flask routes, service, ClusterCache fed
with Node and Pod JSON as the watch would deliver it); only the HTTP socket is replaced by Flask's test
client, so the figures are the extender's own time per call. "cold" runs every call with an empty score
memo and GPU-set cache (topologies are prepared when nodes are watched, as in production); "warm" repeats
calls with what the earlier calls filled. Run: ``.venv/bin/python hack/bench_prioritize.py [--nodes 1000]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

import orjson
from flask.testing import FlaskClient
from perf.profiling import NoBinder
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.extender_settings import ExtenderSettings
from extender.service import Extender
from kubeio.cluster_cache import ClusterCache
from scheduling.topology import TopologyCache, parse_topo_matrix, uniform
from testbed.nodes import SimNodeSpec, node_object, status_patch

HERE = Path(__file__).resolve().parent


def topologies() -> list[str]:
    files = sorted((HERE / "topologies").glob("*.txt"))
    docs = [parse_topo_matrix(f.read_text()) for f in files]
    docs += [uniform(8, "NV12", nvswitch=True), uniform(8, "SYS")]
    return [d.to_json() for d in docs]


def cluster(nodes: int, rng: random.Random) -> tuple[ClusterCache, list[str]]:
    docs = topologies()
    cache = ClusterCache()
    raw_nodes, raw_pods = [], []
    for i in range(nodes):
        spec = SimNodeSpec(f"node-{i:05d}", gpus=8, topology=docs[i % len(docs)])
        raw = node_object(spec)
        raw["status"] = status_patch(spec, "2026-11-22T00:00:00Z")["status"]
        raw_nodes.append(raw)
        taken = rng.sample(range(8), rng.choice([0, 1, 2, 3, 4, 6]))
        if taken:
            raw_pods.append(_pod(f"busy-{i}", spec.name, taken))
    cache.replace_nodes(raw_nodes)
    cache.replace_pods(raw_pods)
    return cache, [n["metadata"]["name"] for n in raw_nodes]


def _pod(name: str, node: str, gpus: list[int]) -> dict[str, Any]:
    requests = {"nvidia.com/gpu": str(len(gpus))}
    return {
        "metadata": {"uid": f"uid-{name}", "namespace": "bench", "name": name,
                     "annotations": {"phalanx.io/gpus": ",".join(map(str, sorted(gpus)))}},
        "spec": {"nodeName": node, "schedulerName": "phalanx",
                 "containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": "Running"},
    }  # fmt: skip


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(7)
    cache, names = cluster(args.nodes, rng)
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {args.nodes} candidate 8-GPU nodes,")
    print(f"{len(topologies())} distinct topologies, {args.calls} calls per row")
    print(f"{'pod GPUs':>8}  {'cache':>5}  {'p50 ms':>8}  {'p99 ms':>8}  {'max ms':>8}")
    for gpus in (1, 2, 4, 8):
        pending = {"metadata": {"uid": "u", "namespace": "bench", "name": f"p{gpus}"},
                   "spec": {"schedulerName": "phalanx", "containers": [
                       {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}  # fmt: skip
        body = orjson.dumps({"Pod": pending, "Nodes": None, "NodeNames": names})
        for mode in ("cold", "warm"):
            samples = []
            client = _client(cache)
            if mode == "warm":
                client.post("/prioritize", data=body, content_type="application/json")
            for _ in range(args.calls):
                if mode == "cold":
                    client = _client(cache)  # empty score memo and GPU-set cache
                start = time.perf_counter()
                reply = client.post("/prioritize", data=body, content_type="application/json")
                samples.append((time.perf_counter() - start) * 1000)
                assert reply.status_code == 200, reply.data
            p50, p99 = statistics.median(samples), percentile(samples, 0.99)
            print(f"{gpus:>8}  {mode:>5}  {p50:8.2f}  {p99:8.2f}  {max(samples):8.2f}")


def _client(cache: ClusterCache) -> FlaskClient:
    service = Extender(cache, NoBinder(), clock=time.monotonic, promise_ttl=60, topologies=TopologyCache())
    app = create_app(ExtenderSettings(), service, registry=CollectorRegistry(), ready=lambda: True)
    return app.test_client()


if __name__ == "__main__":
    main()
