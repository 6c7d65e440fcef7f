"""Benchmark: creation to bound of elastic workers, pinned by the webhook vs by the pass (prints figures).

Measures both ways of pinning a worker the MPI Operator creates, so that the choice rests on figures. This
starts its own test bed (control plane, extender, placement manager with its pin webhook, simulated
kubelet, the real MPI Operator v0.7.0, three 8-GPU nodes in the elastic pool), then, alternating the two
modes round by round so that a drift of the machine hits both alike, creates an elastic MPIJob (min 1,
max 8 workers of 2 GPUs) that grows from 1 to 8 workers, and measures, from a watch, the time from each
grown worker's creation to the moment it has a node. In ``pass`` mode the webhook configuration is
deleted, so each grown worker is first turned down by its node's pin taint and pinned by the next pass.
Run: ``.venv/bin/python hack/bench_pins.py [--rounds 3] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from localbed import Testbed
from workload import PodTimeline, create_mpijob, elastic_mpijob, ensure_namespace, list_pods, wait_for

from testbed.nodes import fleet

MODES = ("webhook", "pass")
NODES = 3
MAX_WORKERS = 8


def grow_once(bed: Testbed, namespace: str, name: str) -> list[float]:
    """One elastic job grown from 1 to ``MAX_WORKERS``; creation -> bound of each grown worker, seconds."""
    body = elastic_mpijob(name, workers=1, gpus_per_worker=2, max_workers=str(MAX_WORKERS), min_available=2)
    workers = [f"{name}-worker-{i}" for i in range(1, MAX_WORKERS)]
    with PodTimeline(bed.http, namespace) as timeline:
        create_mpijob(bed.http, namespace, body)
        wait_for(
            f"{name} grown to {MAX_WORKERS}",
            lambda: all(w in timeline.bound_at for w in workers),
            timeout=120,
            interval=0.05,
        )
    bed.http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{name}")
    wait_for("the job's pods deleted", lambda: not list_pods(bed.http, namespace), timeout=60)
    return [timeline.bound_at[w] - timeline.created_at[w] for w in workers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-pins-") as state:
        bed = Testbed(Path(state), mpi_operator=True, extender_env={"PHALANX_LOG_LEVEL": "WARNING"})
        try:
            bed.start()
            bed.add_nodes(fleet(NODES, gpus=8))
            for i in range(1, NODES + 1):
                bed.http.request(
                    "PATCH",
                    f"/api/v1/nodes/gpu-node-{i}",
                    body={"metadata": {"labels": {"phalanx.io/elastic-pool": "true"}}},
                    content_type="application/merge-patch+json",
                )
            namespace = "bench-pins"
            ensure_namespace(bed.http, namespace)
            time.sleep(3)  # the pool tainted, the caches warm
            for r in range(args.rounds):
                for mode in MODES if r % 2 == 0 else reversed(MODES):
                    bed.set_pin_webhook(enabled=mode == "webhook")
                    samples[mode] += grow_once(bed, namespace, f"grow-{mode}-{r}")
        finally:
            bed.stop()
    rows = {
        mode: {
            "workers": len(values),
            "p50_seconds": round(statistics.median(values), 3),
            "p90_seconds": round(statistics.quantiles(values, n=10)[-1], 3),
            "max_seconds": round(max(values), 3),
        }
        for mode, values in samples.items()
    }
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {NODES} simulated 8-GPU nodes")
    print("creation -> bound of grown elastic workers (1 -> 8 workers of 2 GPUs, placement pass every 1 s)")
    print(f"{'pinned by':>9}  {'workers':>7}  {'p50 s':>6}  {'p90 s':>6}  {'max s':>6}")
    for mode, row in rows.items():
        print(
            f"{mode:>9}  {row['workers']:>7}  {row['p50_seconds']:>6.3f}  {row['p90_seconds']:>6.3f}  "
            f"{row['max_seconds']:>6.3f}"
        )
    ratio = rows["pass"]["p50_seconds"] / max(rows["webhook"]["p50_seconds"], 1e-9)
    print(f"p50 pass / webhook: {ratio:.1f}x")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
