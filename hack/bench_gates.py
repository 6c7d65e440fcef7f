"""Benchmark: what the admission gate adds to creation -> bound on an idle cluster (prints figures).

The gate adds a webhook call at creation, a wait for the release pass and one PATCH per pod before
kube-scheduler sees a pod; the door (``scheduling.admission.door``) lets a pod the pass would release
now in ungated, so a single pod on an idle cluster skips the pass. This starts its own test bed with
admission gates on (control plane, extender, placement manager with its webhooks, simulated kubelet,
three 8-GPU nodes) and, changing the order of the modes round by round so that a drift of the machine
hits all alike, creates single 1-GPU pods one at a time and a 4-member gang, waits for each to be bound
and deletes it, measuring from a watch the time from creation to bound. Modes: ``door`` (as shipped),
``gated`` (the placement manager restarted with ``--admit-at-creation=false``: every pod waits for a
pass), ``ungated`` (the gate webhook configuration deleted, so pods go straight to kube-scheduler; the
placement manager still runs its pass, and finds nothing gated).
Run: ``.venv/bin/python hack/bench_gates.py [--rounds 3] [--pods 10] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from localbed import Testbed
from workload import (
    PodTimeline,
    create_pod,
    create_podgroup,
    delete_pods,
    ensure_namespace,
    gpu_pod,
    member,
    podgroup,
    wait_for,
)

from testbed.nodes import fleet

MODES = ("door", "gated", "ungated")
GANG = 4


def _bound(timeline: PodTimeline, name: str) -> Callable[[], bool]:
    return lambda: name in timeline.bound_at


def singles(bed: Testbed, namespace: str, prefix: str, count: int) -> list[float]:
    """Creation -> bound of ``count`` single pods created one after the other, seconds."""
    names = [f"{prefix}-{i}" for i in range(count)]
    with PodTimeline(bed.http, namespace) as timeline:
        for name in names:
            create_pod(bed.http, namespace, gpu_pod(name, 1))
            wait_for(f"{name} bound", _bound(timeline, name), timeout=60, interval=0.01)
    delete_pods(bed.http, namespace)
    return [timeline.bound_at[n] - timeline.created_at[n] for n in names]


def gang(bed: Testbed, namespace: str, name: str) -> float:
    """Creation of the gang's last member -> its last member bound, seconds."""
    names = [f"{name}-{i}" for i in range(GANG)]
    with PodTimeline(bed.http, namespace) as timeline:
        create_podgroup(bed.http, namespace, podgroup(name, GANG))
        for pod in names:
            create_pod(bed.http, namespace, member(pod, name, 2))
        wait_for(
            f"{name} bound", lambda: all(n in timeline.bound_at for n in names), timeout=60, interval=0.01
        )
    delete_pods(bed.http, namespace)
    bed.http.request("DELETE", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}")
    return max(timeline.bound_at[n] for n in names) - max(timeline.created_at[n] for n in names)


def _switch(bed: Testbed, mode: str, shipped: tuple[str, ...]) -> None:
    """Put the bed in ``mode``: the placement manager's door on or off, the gate webhook registered or not."""
    wanted = (*shipped, "--admit-at-creation", "false") if mode == "gated" else shipped
    if bed.placement_args != wanted:
        bed.kill_placement(signal.SIGTERM)
        bed.placement_args = wanted
        bed.start_placement()
    bed.set_admission_gate(enabled=mode != "ungated")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods", type=int, default=10, help="single pods per round and mode")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    single: dict[str, list[float]] = {mode: [] for mode in MODES}
    gangs: dict[str, list[float]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory(prefix="phalanx-bench-gates-") as state:
        bed = Testbed(Path(state), admission_gates=True, extender_env={"PHALANX_LOG_LEVEL": "WARNING"})
        try:
            bed.start()
            bed.add_nodes(fleet(3, gpus=8))
            namespace = "bench-gates"
            ensure_namespace(bed.http, namespace)
            time.sleep(2)  # the caches warm
            shipped = bed.placement_args
            for r in range(args.rounds):
                for mode in MODES[r % len(MODES) :] + MODES[: r % len(MODES)]:
                    _switch(bed, mode, shipped)
                    time.sleep(1)  # the API server's webhook configuration cache
                    single[mode] += singles(bed, namespace, f"{mode}-{r}", args.pods)
                    gangs[mode].append(gang(bed, namespace, f"g-{mode}-{r}"))
        finally:
            bed.stop()
    rows = {
        mode: {
            "pods": len(single[mode]),
            "p50_seconds": round(statistics.median(single[mode]), 3),
            "p90_seconds": round(statistics.quantiles(single[mode], n=10)[-1], 3),
            "gang_p50_seconds": round(statistics.median(gangs[mode]), 3),
        }
        for mode in MODES
    }
    print(
        f"python {platform.python_version()}, {os.cpu_count()} cores, 3 simulated 8-GPU nodes, idle cluster"
    )
    print(f"creation -> bound: 1-GPU pods one at a time; a {GANG}-member gang (last created -> last bound)")
    print(f"{'mode':>8}  {'pods':>5}  {'p50 s':>6}  {'p90 s':>6}  {'gang p50 s':>10}")
    for mode, row in rows.items():
        print(
            f"{mode:>8}  {row['pods']:>5}  {row['p50_seconds']:>6.3f}  {row['p90_seconds']:>6.3f}  "
            f"{row['gang_p50_seconds']:>10.3f}"
        )
    for mode in ("gated", "door"):
        added = rows[mode]["p50_seconds"] - rows["ungated"]["p50_seconds"]
        print(f"{mode}: the gate adds {1000 * added:.0f} ms to the p50 of a single pod on an idle cluster")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
