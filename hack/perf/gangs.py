"""Section 3: gang time-to-bound through the real kube-scheduler, extender and bind barrier.

One gang at a time: a PodGroup with ``minMember`` = size, then its one-GPU members created together by a
thread pool. The figure is the time from the moment the last member's creation returned to the moment a
watch has seen every member bound (the goal: 5 s for 256 pods). The gang's binds all wait in the
extender's barrier, so the extender needs more threads than the largest gang (``PHALANX_THREADS``).

Beside the largest gang, as many single one-GPU pods (no PodGroup) go through the extender-free baseline
kube-scheduler the same way (created together, timed from the last creation to all bound): the same-run
goal compares the gang with them, both measured in the same run on the same cluster. Then the same gang
goes through kube-scheduler's own gang scheduling (``native_gang``), the upstream anchor.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from workload import PODGROUPS, create_pod, create_podgroup, gpu_pod, member, podgroup

from kubeio.errors import KubeError
from kubeio.http import JsonObject
from perf.bed import BASELINE_PROFILE, NATIVE_GANG_GATES, BenchBed, plain_config
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
        rows.append(native_gang(bb, namespace, nodes, size, progress))
    return rows


NATIVE_PROFILE = "native-gang"
"""Profile name of the kube-scheduler with its own gang scheduling (no extender)."""

NATIVE_PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups"


def native_gang(bb: BenchBed, namespace: str, nodes: int, size: int, progress: Progress) -> dict[str, Any]:
    """The same gang through kube-scheduler's native gang scheduling (v1.36, alpha), created and timed alike.

    A ``scheduling.k8s.io/v1alpha2`` PodGroup with a gang policy of ``minCount`` = ``size``, members
    naming it in ``spec.schedulingGroup``, and a kube-scheduler of its own (every node scored, the
    ``GenericWorkload`` and ``GangScheduling`` gates on, no extender). A row that could not run says why
    (``"error"``), and the goal that reads it then says "n/a".
    """
    group = f"native-{size}"
    row: dict[str, Any] = {"nodes": nodes, "size": size, "native_gang": True}
    config = bb.state_dir / "native-scheduler-config.yaml"
    config.write_text(
        plain_config(NATIVE_PROFILE, orjson.dumps(str(bb.bed.cluster.scheduler_kubeconfig)).decode())
    )
    body = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": group},
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
    }
    try:
        bb.http.request("POST", NATIVE_PODGROUPS.format(namespace=namespace), body=body)
    except KubeError as exc:
        progress(f"native gang: no PodGroup API ({exc}); row skipped")
        return row | {"error": f"PodGroup not created: {exc}"}
    pods = {}
    for i in range(size):
        pod = gpu_pod(f"{group}-{i:03d}", 1, scheduler=NATIVE_PROFILE)
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
        pods[pod["metadata"]["name"]] = pod
    started = bb.start_scheduler(NATIVE_PROFILE, config, (NATIVE_GANG_GATES,))
    try:
        row |= _time_binds(bb, namespace, nodes, pods, progress, what=f"native gang of {size}")
    finally:
        proc, _, log = started
        bb.stop_scheduler(NATIVE_PROFILE, proc, log)
    row["native_gang"] = True
    bb.delete_pods(namespace)
    with contextlib.suppress(KubeError):
        bb.http.request("DELETE", NATIVE_PODGROUPS.format(namespace=namespace) + f"/{group}")
    return row


def _time_binds(
    bb: BenchBed, namespace: str, nodes: int, pods: dict[str, JsonObject], progress: Progress, *, what: str
) -> dict[str, Any]:
    """Create ``pods`` together (16 at a time) and time from the last creation to all seen bound."""
    settled = wait_for_idle_cpu(progress, what=f"the {what}")
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
        "disturbed": "an end-to-end test run was running" if e2e_runs() else settled.busy_note("the gang"),
        "create_seconds": round(last_created - started, 3),
        "last_created_to_all_bound_seconds": round(max(bound) - last_created, 3) if complete else None,
    }
    progress(
        f"{what} @ {nodes} nodes: {len(bound)}/{len(pods)} bound, "
        f"{row['last_created_to_all_bound_seconds']} s after the last was created"
    )
    return row
