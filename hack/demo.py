"""The demo: a real control plane, simulated 8-GPU nodes, the extender, and GPU pods placed through it.

Run ``hack/demo`` (it bootstraps first). It prints where each pod landed and which GPU indices it got,
and, for a pod that fits nowhere, the reason kube-scheduler recorded. ``--keep`` leaves everything
running and prints how to reach it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from localbed import Testbed
from workload import create_pod, ensure_namespace, events_for, get_pod, gpu_pod, gpus_of

from testbed.nodes import fleet

NAMESPACE = "demo"
PODS = [("llama-8", 8), ("resnet-4", 4), ("bert-2a", 2), ("bert-2b", 2), ("tiny-1a", 1), ("tiny-1b", 1),
        ("vit-4", 4), ("gpt-8", 8), ("tiny-1c", 1), ("huge-16", 16)]  # fmt: skip


def main() -> int:
    """Run the demo."""
    parser = argparse.ArgumentParser(description="phalanx demo on the local control plane")
    parser.add_argument("--nodes", type=int, default=4, help="simulated 8-GPU nodes (default 4)")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running afterwards")
    parser.add_argument("--dir", type=Path, default=Path.home() / ".local/state/phalanx/demo")
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    bed = Testbed(args.dir)
    started = time.monotonic()
    try:
        bed.start()
        bed.add_nodes(fleet(args.nodes, gpus=8, zones=1, racks_per_zone=2))
        took = time.monotonic() - started
        print(f"control plane, extender and {args.nodes} simulated 8-GPU nodes up in {took:.1f}s")
        ensure_namespace(bed.http, NAMESPACE)
        for name, gpus in PODS:
            create_pod(bed.http, NAMESPACE, gpu_pod(name, gpus))
        print(f"submitted {len(PODS)} pods with schedulerName: phalanx\n")
        rows = [_outcome(bed, name, gpus) for name, gpus in PODS]
        width = max(len(r[0]) for r in rows)
        print(f"{'POD':<{width}}  GPUS  {'NODE':<11} {'GPU INDICES':<16} STATUS")
        for name, gpus, node, indices, status in rows:
            print(f"{name:<{width}}  {gpus:>4}  {node:<11} {indices:<16} {status}")
        if args.keep:
            print(f"\nleft running: export KUBECONFIG={bed.kubeconfig}")
            print(f"stop it with: hack/cluster down --dir {args.dir}")
            return 0
    finally:
        if not args.keep:
            bed.stop()
    return 0


def _outcome(bed: Testbed, name: str, gpus: int) -> tuple[str, int, str, str, str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pod = get_pod(bed.http, NAMESPACE, name)
        node = pod["spec"].get("nodeName")
        if node and pod["status"].get("phase") == "Running":
            return name, gpus, node, ",".join(map(str, gpus_of(pod))), "Running"
        failed = [e for e in events_for(bed.http, NAMESPACE, name) if e["reason"] == "FailedScheduling"]
        if failed and not node:
            return name, gpus, "-", "-", "Pending: " + failed[-1]["message"]
        time.sleep(0.2)
    return name, gpus, "-", "-", "no decision within 60s"


if __name__ == "__main__":
    sys.exit(main())
