"""Section 2: per-call latency of the running extender's ``filter`` and ``prioritize``.

Requests go straight to the extender under gunicorn, as kube-scheduler sends them with
``nodeCacheCapable: true``: a pending pod in the captured shape and every node of the cluster as
``NodeNames``, over one kept-alive HTTP connection, one call at a time (kube-scheduler's scheduling loop
is serial, docs/design/extender-protocol.md §2.8). Timing each call here gives exact percentiles; the
extender's own histogram (``phalanx_extender_request_duration_seconds``) has buckets too coarse for a
p99 at 2 ms.

The nodes carry the topology annotations of ``hack/topologies``, and a multi-GPU pod makes
``prioritize`` score GPU sets by bandwidth (a one-GPU pod scores 10 without looking at the topology).
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import orjson

from perf.common import Progress, e2e_runs, summary
from perf.requests import probe_pod

POD_GPUS = (1, 4)
"""Pods measured: one GPU (packing only) and four GPUs (topology scoring of every candidate)."""

WARMUP_CALLS = 5
"""Untimed calls first: the first call of a shape fills the extender's GPU-set score cache."""


def _call(conn: http.client.HTTPConnection, path: str, body: bytes) -> bytes:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    reply = conn.getresponse()
    data = reply.read()
    if reply.status != 200:
        msg = f"POST {path}: HTTP {reply.status}: {data[:300]!r}"
        raise RuntimeError(msg)
    return data


def measure_calls(url: str, node_names: Sequence[str], calls: int, progress: Progress) -> dict[str, Any]:
    """Time ``calls`` filter and prioritize calls over all ``node_names``; return p50/p99 per verb and pod.

    Returns:
        ``{"candidates": N, "filter": {"1": summary, "4": summary}, "prioritize": {...},
        "request_bytes": {...}}``, times in milliseconds.
    """
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    result: dict[str, Any] = {"candidates": len(node_names), "calls": calls, "request_bytes": {}}
    try:
        for verb in ("filter", "prioritize"):
            result[verb] = {}
            for gpus in POD_GPUS:
                pod = probe_pod(f"perf-{verb}-{gpus}", gpus)
                body = orjson.dumps({"Pod": pod, "Nodes": None, "NodeNames": list(node_names)})
                result["request_bytes"][str(gpus)] = len(body)
                reply = orjson.loads(_call(conn, f"/{verb}", body))
                for _ in range(WARMUP_CALLS - 1):
                    _call(conn, f"/{verb}", body)
                samples = []
                for _ in range(calls):
                    start = time.perf_counter()
                    _call(conn, f"/{verb}", body)
                    samples.append((time.perf_counter() - start) * 1000)
                result[verb][str(gpus)] = summary(samples)
                if e2e_runs():
                    result["disturbed"] = "an end-to-end test run was running during the calls"
                if verb == "filter":
                    result[verb][str(gpus)]["feasible"] = len(reply.get("NodeNames") or [])
                figures = result[verb][str(gpus)]
                progress(
                    f"  {verb} {gpus}-GPU pod over {len(node_names)} nodes: "
                    f"p50 {figures['p50']:.2f} ms, p99 {figures['p99']:.2f} ms"
                )
    finally:
        conn.close()
    return result
