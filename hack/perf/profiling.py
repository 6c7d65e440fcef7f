"""Profile of the extender's ``filter`` and ``prioritize`` at 1,000 and 5,000 candidate nodes.

The profiled code is the real extender (Flask app, routes, service, ``ClusterCache`` fed with API-shaped
nodes carrying the ``hack/topologies`` annotations, and random occupancy so free GPU sets differ); only
the socket is replaced by Flask's test client, so the profile shows the extender's own work per call
and nothing of gunicorn or the benchmark client. pyinstrument samples the calls; the report lists the
functions with the most *self* time (time in the function's own lines, not in what it calls), with
file:line, and the inclusive time of the product functions on the request path.

pyinstrument is a profiling tool, not a dependency of phalanx: ``hack/bench --profile`` installs it
into ``.venv`` only (never into ``pyproject.toml``). Without it this section says so and is skipped.
"""

from __future__ import annotations

import argparse
import importlib
import random
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.extender_settings import ExtenderSettings
from extender.service import Extender
from kubeio.binding import BindStatus
from kubeio.cluster_cache import ClusterCache
from perf.bed import node_specs, topology_documents
from perf.common import Progress, subprocess_env, summary
from perf.requests import probe_pod
from scheduling.model import Pod
from testbed.nodes import node_object, status_patch

OCCUPANCY = (0, 0, 1, 2, 3, 4, 6)
"""GPUs already taken on a node, drawn per node: a mix of empty and partly used nodes."""


class NoBinder:
    """A binder for extenders that only filter and prioritize: a bind there would be a bug in the harness.

    Shared with ``hack/bench_prioritize.py``, which drives the same app through Flask's test client.
    """

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        """Know no pod: the calls measured never look one up to bind it."""
        return None

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> BindStatus:
        """Refuse: a bind during a measurement would be a bug in the harness."""
        raise NotImplementedError


def _cache(nodes: int, rng: random.Random) -> tuple[ClusterCache, list[str]]:
    documents = topology_documents()
    cache = ClusterCache()
    raw_nodes, raw_pods = [], []
    for spec in node_specs(0, nodes, documents):
        raw = node_object(spec)
        raw["status"] = status_patch(spec, "2026-11-22T00:00:00Z")["status"]
        raw_nodes.append(raw)
        taken = sorted(rng.sample(range(8), rng.choice(OCCUPANCY)))
        if taken:
            raw_pods.append(
                {
                    "metadata": {
                        "uid": f"uid-{spec.name}",
                        "namespace": "busy",
                        "name": f"busy-{spec.name}",
                        "annotations": {"phalanx.io/gpus": ",".join(map(str, taken))},
                    },
                    "spec": {
                        "nodeName": spec.name,
                        "schedulerName": "phalanx",
                        "containers": [
                            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(len(taken))}}}
                        ],
                    },
                    "status": {"phase": "Running"},
                }
            )
    cache.replace_nodes(raw_nodes)
    cache.replace_pods(raw_pods)
    return cache, [n["metadata"]["name"] for n in raw_nodes]


def _walk(
    frame: Any,
    self_times: dict[tuple[str, str, int], float],
    inclusive: dict[tuple[str, str, int], float],
    on_stack: frozenset[tuple[str, str, int]],
) -> None:
    """Sum self time per function and inclusive time per function (counted once per stack).

    pyinstrument's synthetic ``[self]`` frames are already in their parent's ``total_self_time``.
    """
    if frame.is_synthetic:
        return
    key = (
        str(frame.file_path_short or frame.file_path or "?"),
        str(frame.function or "?"),
        int(frame.line_no or 0),
    )
    self_times[key] = self_times.get(key, 0.0) + float(frame.total_self_time)
    if key not in on_stack:
        inclusive[key] = inclusive.get(key, 0.0) + float(frame.time)
    for child in frame.children:
        _walk(child, self_times, inclusive, on_stack | {key})


def _top(session: Any, total: float, count: int) -> dict[str, list[dict[str, Any]]]:
    root = session.root_frame()
    self_times: dict[tuple[str, str, int], float] = {}
    inclusive: dict[tuple[str, str, int], float] = {}
    if root is not None:
        _walk(root, self_times, inclusive, frozenset())

    def rows(table: dict[tuple[str, str, int], float], keep: Any) -> list[dict[str, Any]]:
        ranked = sorted(((t, k) for k, t in table.items() if keep(k)), reverse=True)[:count]
        return [
            {
                "where": f"{k[0]}:{k[2]}",
                "function": k[1],
                "seconds": round(t, 3),
                "share": round(t / total, 3) if total else 0.0,
            }
            for t, k in ranked
        ]

    product = ("scheduling/", "kubeio/", "extender/")
    return {
        "self": rows(self_times, lambda k: True),
        "product_inclusive": rows(inclusive, lambda k: any(p in k[0] for p in product)),
    }


def profile_verbs(
    node_counts: tuple[int, ...], calls: int, out_dir: Path, progress: Progress
) -> dict[str, Any]:
    """Run the profile in a fresh interpreter and return its report.

    A fresh interpreter because the harness runs for an hour while the product may change on disk: a
    module imported now next to one imported an hour ago would be a mix no extender ever ran.
    """
    argv = [sys.executable, "-m", "perf.profiling", "--nodes", ",".join(map(str, node_counts))]
    argv += ["--calls", str(calls), "--out", str(out_dir)]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, env=subprocess_env(), text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"available": False, "reason": f"the profile subprocess failed (exit {proc.returncode})"}
    report: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    return report


def _profile_in_process(
    node_counts: tuple[int, ...], calls: int, out_dir: Path, progress: Progress
) -> dict[str, Any]:
    """Profile filter and prioritize of a 4-GPU pod at each node count; write HTML/text profiles too."""
    try:
        pyinstrument: Any = importlib.import_module("pyinstrument")
    except ImportError:
        return {"available": False, "reason": "pyinstrument is not installed (hack/bench installs it)"}
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"available": True, "pyinstrument": pyinstrument.__version__, "cases": []}
    for nodes in node_counts:
        cache, names = _cache(nodes, random.Random(7))
        service = Extender(
            cache, NoBinder(), clock=time.monotonic, promise_ttl=60, topologies=cache.topologies
        )
        app = create_app(ExtenderSettings(), service, registry=CollectorRegistry(), ready=lambda: True)
        client = app.test_client()
        for verb in ("filter", "prioritize"):
            body = orjson.dumps({"Pod": probe_pod(f"prof-{verb}", 4), "Nodes": None, "NodeNames": names})
            for _ in range(
                3
            ):  # the first calls fill the GPU-set score cache; the profile is the steady state
                client.post(f"/{verb}", data=body, content_type="application/json")
            samples = []
            for _ in range(calls):  # timed without the profiler, which would inflate the figures
                start = time.perf_counter()
                reply = client.post(f"/{verb}", data=body, content_type="application/json")
                samples.append((time.perf_counter() - start) * 1000)
                if reply.status_code != 200:
                    msg = f"{verb}: HTTP {reply.status_code}: {reply.data[:300]!r}"
                    raise RuntimeError(msg)
            profiler = pyinstrument.Profiler(interval=0.0005)
            profiler.start()
            for _ in range(calls):
                client.post(f"/{verb}", data=body, content_type="application/json")
            session = profiler.stop()
            stem = out_dir / f"profile-{verb}-{nodes}"
            stem.with_suffix(".html").write_text(profiler.output_html())
            stem.with_suffix(".txt").write_text(
                profiler.output_text(unicode=False, color=False, show_all=False)
            )
            timing = summary(samples)
            case: dict[str, Any] = {
                "verb": verb,
                "nodes": nodes,
                "calls": calls,
                "in_process_ms": timing,
                "profile": str(stem.with_suffix(".html")),
                **_top(session, session.duration, 12),
            }
            result["cases"].append(case)
            progress(f"profile {verb} @ {nodes} candidates: p50 {timing['p50']:.2f} ms in-process")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the profile subprocess: progress on stderr, the report as one JSON line on stdout."""
    parser = argparse.ArgumentParser(description="profile the extender's filter and prioritize")
    parser.add_argument("--nodes", required=True, help="comma-separated candidate counts")
    parser.add_argument("--calls", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    counts = tuple(int(n) for n in args.nodes.split(","))
    print(orjson.dumps(_profile_in_process(counts, args.calls, args.out, Progress())).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
