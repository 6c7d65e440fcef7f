#!/usr/bin/env python3
"""Print the node side's figures: do containers get the GPUs phalanx chose; is a blind plugin caught?

On a fresh test bed with N simulated 8-GPU NVLink nodes (DGX-1 V100 cube-mesh), each behind the kubelet
v1.36.3 device manager with the node agent as in production:

1. a burst of pods of 1, 2, 4 and 8 GPUs with phalanx's device plugin serving: mismatches (a container
   whose devices differ from ``phalanx.io/gpus`` at bind), GPUs two running pods held at once, and how
   the plugin knew which pod the kubelet admitted (the agents' metrics);
2. the same with a topology-blind plugin in place of phalanx's on every node (the agents only read the
   truth): the mismatches that appear, and how long until each annotation followed the devices
   (the observer polls every 0.25 s, which bounds the resolution).

Usage: ``.venv/bin/python hack/node_side_figures.py [--nodes 4] [--pods 200] [--blind-pods 60]``.
Takes a few minutes; run it alone (it starts its own control plane).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bed_devices import DeviceBed
from localbed import REPO, Testbed
from node_side import DEVICE_KEY, Observer, burst, corrected_pods, figures, settled, uuid_indices
from workload import ensure_namespace, metric_value, scrape, wait_for

from testbed.nodes import SimNodeSpec

CUBE_MESH = REPO / "hack" / "topologies" / "v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt"


def run(bed: Testbed, devices: DeviceBed, nodes: list[str], namespace: str, pods: int, title: str) -> None:
    http = bed.http
    ensure_namespace(http, namespace)
    started = time.monotonic()
    with Observer(http, namespace, uuid_indices(http, nodes)) as observer:
        burst(http, namespace, pods=pods, per_burst=25, gap=3.0, prefix=namespace[:1])
        wait_for("every pod to finish", lambda: settled(http, namespace), timeout=1800, interval=2.0)
    result = figures(observer, time.monotonic() - started, corrected_pods(http, namespace))
    print(f"\n{title}")
    for line in result.lines():
        print(f"  {line}")
    for basis in ("placed", "kubelet", "guessed", "unclaimed"):
        total = sum(
            _metric(devices, n, "phalanx_device_plugin_preferences_total", basis=basis) for n in nodes
        )
        print(f"  plugin preferences '{basis}': {total:.0f}")
    for kind in ("mismatch", "unannotated"):
        total = sum(_metric(devices, n, "phalanx_node_gpu_corrections_total", kind=kind) for n in nodes)
        print(f"  annotations corrected ({kind}): {total:.0f}")


def _metric(devices: DeviceBed, node: str, name: str, **labels: str) -> float:
    page = scrape(f"http://127.0.0.1:{devices.metrics_ports[node]}/metrics")
    return metric_value(page, name, **labels) or 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--blind-pods", type=int, default=60)
    args = parser.parse_args()
    nodes = [f"fig-node-{i}" for i in range(1, args.nodes + 1)]
    with tempfile.TemporaryDirectory(prefix="phalanx-node-side-") as state:
        bed = Testbed(Path(state), placement_grace=3.0, log=lambda line: None)
        try:
            bed.start()
            devices = DeviceBed(bed, CUBE_MESH)
            devices.add([SimNodeSpec(n, gpus=8, labels={DEVICE_KEY: "burst"}) for n in nodes], plugin=True)
            title = f"{args.pods} pods of 1/2/4/8 GPUs in bursts of 25, {args.nodes} x 8-GPU NVLink nodes,"
            run(bed, devices, nodes, "enforce", args.pods, f"{title} phalanx's device plugin:")
            for node in nodes:
                devices.swap_for_blind_plugin(node)
            run(bed, devices, nodes, "observe", args.blind_pods, "the same with a topology-blind plugin:")
        finally:
            bed.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
