"""Section 3: gang time-to-bound through the real kube-scheduler, extender and bind barrier.

One gang at a time: a PodGroup with ``minMember`` = size, then its one-GPU members created together by a
thread pool. The figure is the time from the moment the last member's creation returned to the moment a
watch has seen every member bound (the goal: 5 s for 256 pods). The gang's binds all wait in the
extender's barrier, so the extender needs more threads than the largest gang (``PHALANX_THREADS``).

Beside the largest gang, as many single one-GPU pods (no PodGroup) go through the extender-free baseline
kube-scheduler the same way (created together, timed from the last creation to all bound): the same-run
goal compares the gang with them, both measured in the same run on the same cluster.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from workload import PODGROUPS, create_pod, create_podgroup, gpu_pod, member, podgroup

from kubeio.http import JsonObject
from perf.bed import BASELINE_PROFILE, BenchBed
from perf.common import Progress, e2e_runs, wait_for_idle_cpu
from perf.watch import BindWatch


def measure_gangs(bb: BenchBed, nodes: int, sizes: Sequence[int], progress: Progress) -> list[dict[str, Any]]:
    """Place one gang of each size in turn, then the baseline's single pods as many as the largest gang.

    Returns per gang the creation time and the time to bound; the last row is the baseline's
    (``"baseline_single_pods": true``).
    """
    namespace = bb.namespace(f"perf-gangs-{nodes}")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        group = f"gang-{size}"
        create_podgroup(bb.http, namespace, podgroup(group, size))
        pods = {f"{group}-{i:03d}": member(f"{group}-{i:03d}", group, 1) for i in range(size)}
        rows.append(_time_binds(bb, namespace, nodes, pods, progress, what=f"gang of {size}"))
        bb.delete_pods(namespace)
        bb.http.request("DELETE", PODGROUPS.format(namespace=namespace) + f"/{group}")
    if sizes:
        size = max(sizes)
        pods = {
            f"single-{i:03d}": gpu_pod(f"single-{i:03d}", 1, scheduler=BASELINE_PROFILE) for i in range(size)
        }
        bb.start_baseline()
        try:
            row = _time_binds(bb, namespace, nodes, pods, progress, what=f"baseline, {size} single pods")
        finally:
            bb.stop_baseline()
        rows.append(row | {"baseline_single_pods": True})
        bb.delete_pods(namespace)
    return rows


def _time_binds(
    bb: BenchBed, namespace: str, nodes: int, pods: dict[str, JsonObject], progress: Progress, *, what: str
) -> dict[str, Any]:
    """Create ``pods`` together (16 at a time) and time from the last creation to all seen bound."""
    wait_for_idle_cpu(progress, what=f"the {what}")
    returned: dict[str, float] = {}

    def create(name: str) -> None:
        create_pod(bb.http, namespace, pods[name])
        returned[name] = time.monotonic()

    with BindWatch(bb.http, namespace) as watch:
        started = time.monotonic()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(create, sorted(pods)))
        last_created = max(returned.values())
        complete = watch.wait_bound(set(pods), timeout=120.0)
        bound = [watch.bound_at[n] for n in pods if n in watch.bound_at]
    row: dict[str, Any] = {
        "nodes": nodes,
        "size": len(pods),
        "bound": len(bound),
        "complete": complete,
        "disturbed": bool(e2e_runs()),
        "create_seconds": round(last_created - started, 3),
        "last_created_to_all_bound_seconds": round(max(bound) - last_created, 3) if complete else None,
    }
    progress(
        f"{what} @ {nodes} nodes: {len(bound)}/{len(pods)} bound, "
        f"{row['last_created_to_all_bound_seconds']} s after the last was created"
    )
    return row
