"""Section 3: gang time-to-bound through the real kube-scheduler, extender and bind barrier.

One gang at a time: a PodGroup with ``minMember`` = size, then its one-GPU members created together by a
thread pool. The figure is the time from the moment the last member's creation returned to the moment a
watch has seen every member bound (issue 6's goal: 5 s for 256 pods). The gang's binds all wait in the
extender's barrier, so the extender needs more threads than the largest gang (``PHALANX_THREADS``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from workload import PODGROUPS, create_pod, create_podgroup, member, podgroup

from perf.bed import BenchBed
from perf.common import Progress, e2e_runs, wait_for_idle_cpu
from perf.watch import BindWatch


def measure_gangs(bb: BenchBed, nodes: int, sizes: Sequence[int], progress: Progress) -> list[dict[str, Any]]:
    """Place one gang of each size in turn; return per size the creation time and the time to bound."""
    namespace = bb.namespace(f"perf-gangs-{nodes}")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        wait_for_idle_cpu(progress, what=f"the gang of {size}")
        group = f"gang-{size}"
        create_podgroup(bb.http, namespace, podgroup(group, size))
        names = [f"{group}-{i:03d}" for i in range(size)]
        returned: dict[str, float] = {}

        def create(name: str, group: str = group, returned: dict[str, float] = returned) -> None:
            create_pod(bb.http, namespace, member(name, group, 1))
            returned[name] = time.monotonic()

        with BindWatch(bb.http, namespace) as watch:
            started = time.monotonic()
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(create, names))
            last_created = max(returned.values())
            complete = watch.wait_bound(set(names), timeout=120.0)
            bound = [watch.bound_at[n] for n in names if n in watch.bound_at]
        row: dict[str, Any] = {
            "nodes": nodes,
            "size": size,
            "bound": len(bound),
            "complete": complete,
            "disturbed": bool(e2e_runs()),
            "create_seconds": round(last_created - started, 3),
            "last_created_to_all_bound_seconds": round(max(bound) - last_created, 3) if complete else None,
        }
        rows.append(row)
        progress(
            f"gang of {size} @ {nodes} nodes: {len(bound)}/{size} bound, "
            f"{row['last_created_to_all_bound_seconds']} s after the last member was created"
        )
        bb.delete_pods(namespace)
        bb.http.request("DELETE", PODGROUPS.format(namespace=namespace) + f"/{group}")
    return rows
