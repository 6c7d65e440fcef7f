"""Benchmark: gang time-to-bound on the real control plane (not a test: it prints figures).

Starts its own test bed (control plane, extender with enough threads for the largest gang, simulated
kubelet, 32 simulated 8-GPU nodes), then for each scenario creates the PodGroups and pods and measures,
from a watch, the time from the last member's creation to the moment every member has a node.
Run: ``.venv/bin/python hack/bench_gangs.py [--nodes 32] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from localbed import Testbed
from workload import PodTimeline, create_pod, create_podgroup, ensure_namespace, list_pods, member, podgroup

from testbed.nodes import fleet


def scenario(bed: Testbed, name: str, groups: int, size: int) -> dict[str, float]:
    """Create ``groups`` gangs of ``size`` one-GPU pods at once; return timing figures."""
    namespace = f"bench-{name}"
    ensure_namespace(bed.http, namespace)
    for g in range(groups):
        create_podgroup(bed.http, namespace, podgroup(f"g{g}", size))
    with PodTimeline(bed.http, namespace) as timeline:
        start = time.monotonic()
        for i in range(size):
            for g in range(groups):
                create_pod(bed.http, namespace, member(f"g{g}-{i}", f"g{g}", 1))
        created = time.monotonic()
        deadline = created + 300
        while len(timeline.bound_at) < groups * size and time.monotonic() < deadline:
            time.sleep(0.05)
        done = max(timeline.bound_at.values(), default=float("nan"))
        last_created = max(timeline.created_at.values(), default=created)
    bound = len(timeline.bound_at)
    for pod in list_pods(bed.http, namespace):
        bed.http.request(
            "DELETE",
            f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
            body={"gracePeriodSeconds": 0},
        )
    return {
        "groups": groups,
        "size": size,
        "bound": bound,
        "create_seconds": round(created - start, 3),
        "last_created_to_all_bound_seconds": round(done - last_created, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=32)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-") as state:
        bed = Testbed(Path(state), extender_env={"PHALANX_THREADS": "320", "PHALANX_LOG_LEVEL": "WARNING"})
        try:
            bed.start()
            bed.add_nodes(fleet(args.nodes, gpus=8, racks_per_zone=4))
            time.sleep(2)
            rows = [scenario(bed, "one-256", 1, 256), scenario(bed, "sixteen-16", 16, 16)]
        finally:
            bed.stop()
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, {args.nodes} simulated 8-GPU nodes")
    print(f"{'gangs':>5} x {'size':>4}  {'bound':>5}  {'create s':>8}  {'last created -> all bound s':>27}")
    for row in rows:
        print(
            f"{row['groups']:>5} x {row['size']:>4}  {row['bound']:>5}  {row['create_seconds']:>8.2f}  "
            f"{row['last_created_to_all_bound_seconds']:>27.2f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
