"""Section 1: pods bound per second and creation-to-bound latency, with and without the extender.

The same workload (one-GPU and small multi-GPU pods, no PodGroups) goes through each scheduler twice:

- **burst** (throughput): the pods are all created while the scheduler is not scheduling, then it
  starts; throughput is pods bound per second between the first and the last bind, seen by a watch.
  This is the scheduler's own rate, not the harness's creation rate, and it excludes the scheduler's
  start-up (informer sync);
- **paced** (latency): pods are created one by one at a fixed rate while it runs; latency is from the
  moment the harness sends a pod's POST to the moment the watch sees it bound, so p50/p99 describe a
  pod's wait in a cluster that keeps up, not a queue position. The rate must stay below the
  schedulers' capacity for that: at 5,000 nodes the baseline binds about 20 pods/s, and a fixed 20/s
  measured a queue (p50 373 ms for the baseline, 3,366 ms with the extender, growing through the
  phase). So the baseline's paced phase runs at the plan's rate or ``PACED_SHARE`` of the rate its own
  backlog just measured, whichever is lower, and phalanx's at the same rate as the baseline's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from workload import create_pod, gpu_pod

from perf.bed import BASELINE_PROFILE, BenchBed
from perf.common import SIDECAR, Progress, e2e_runs, summary, wait_for_idle_cpu
from perf.watch import BindWatch

GPU_PATTERN = (1, 2, 1, 4)
"""GPUs of successive pods: half one-GPU, a quarter two, a quarter four (2 GPUs a pod on average)."""

PACED_SHARE = 0.5
"""The paced phase runs at most at this share of the baseline's backlog rate in the same run."""

FILL = 0.8
"""At most this share of the cluster's GPUs is asked for at once, so every pod of a phase fits."""


def fitting(pods: int, nodes: int, gpus_per_node: int = 8) -> int:
    """``pods``, or fewer if they would ask for more than ``FILL`` of the GPUs of ``nodes`` nodes.

    >>> fitting(1000, 100), fitting(100, 100)
    (320, 100)
    """
    average = sum(GPU_PATTERN) / len(GPU_PATTERN)
    return min(pods, int(nodes * gpus_per_node * FILL / average))


@dataclass(frozen=True, slots=True)
class Workload:
    """How many pods one scheduler gets at one cluster size.

    Attributes:
        burst_pods: pods created before the scheduler starts (throughput).
        paced_pods: pods created one by one while it runs (latency).
        paced_rate: pods per second of the paced phase.
    """

    burst_pods: int
    paced_pods: int
    paced_rate: float


def gpu_pods(scheduler: str, prefix: str, count: int) -> list[tuple[str, dict[str, Any]]]:
    """``count`` pods of ``GPU_PATTERN`` for ``scheduler``, named ``<prefix>-00001`` on."""
    names = [f"{prefix}-{i + 1:05d}" for i in range(count)]
    return [
        (n, gpu_pod(n, GPU_PATTERN[i % len(GPU_PATTERN)], scheduler=scheduler)) for i, n in enumerate(names)
    ]


def create_all(
    bb: BenchBed, namespace: str, pods: list[tuple[str, dict[str, Any]]], progress: Progress
) -> float:
    """Create ``pods`` with a thread pool; return the seconds it took."""
    started = time.monotonic()
    done = 0
    lock = threading.Lock()

    def one(item: tuple[str, dict[str, Any]]) -> None:
        nonlocal done
        create_pod(bb.http, namespace, item[1])
        with lock:
            done += 1
            if done % 1000 == 0:
                progress(f"  created {done}/{len(pods)} pods")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, pods))
    return time.monotonic() - started


BacklogProbe = Callable[[BindWatch, int], Callable[[], dict[str, Any]]]
"""Started with the pod watch and the backlog size right after the scheduler starts; returns a function
that collects the probe's figures once every pod is bound (``perf.budget`` samples the machine so)."""


def backlog(
    bb: BenchBed,
    which: str,
    nodes: int,
    namespace: str,
    count: int,
    progress: Progress,
    *,
    probe: BacklogProbe | None = None,
) -> dict[str, Any]:
    """Create ``count`` pods while ``which`` scheduler is not scheduling, start it, time the binds.

    The pods stay bound (the caller deletes ``namespace``'s pods). With ``probe``, its figures are
    returned under ``"probe"``.
    """
    result: dict[str, Any] = {}
    scheduler = BASELINE_PROFILE if which == "baseline" else "phalanx"
    if which == "baseline":
        bb.stop_baseline()
    else:
        bb.pause_phalanx(sidecar=which == SIDECAR)
    pods = gpu_pods(scheduler, "b", count)
    progress(f"{which} @ {nodes} nodes: creating a backlog of {len(pods)} pods")
    create_seconds = create_all(bb, namespace, pods, progress)
    result["burst_created_per_second"] = round(len(pods) / create_seconds, 1)
    settled = wait_for_idle_cpu(progress, what="the backlog")
    result["settle_seconds_before_start"] = round(settled.seconds, 1)
    if settled.busy:
        result["disturbed"] = settled.busy_note("the backlog")
    collect: Callable[[], dict[str, Any]] | None = None
    with BindWatch(bb.http, namespace) as watch:
        progress(f"{which} @ {nodes} nodes: starting the scheduler on the backlog")
        started = time.monotonic()
        if which == "baseline":
            bb.start_baseline()
        elif which == SIDECAR:
            bb.resume_sidecar()
        else:
            bb.resume_phalanx()
        if probe is not None:
            collect = probe(watch, len(pods))
        names = {n for n, _ in pods}
        complete = watch.wait_bound(names, timeout=max(300.0, len(pods) / 2))
        times = sorted(watch.bound_at[n] for n in names if n in watch.bound_at)
    if collect is not None:
        result["probe"] = collect()
    if e2e_runs():
        result["disturbed"] = "an end-to-end test run was running at the end of the backlog phase"
    result["burst_pods"] = len(pods)
    result["burst_bound"] = len(times)
    result["burst_complete"] = complete
    result["watch_errors"] = watch.errors
    if len(times) >= 2:
        window = times[-1] - times[0]
        result["pods_per_second"] = round((len(times) - 1) / window, 1) if window > 0 else float("nan")
        result["start_to_all_bound_seconds"] = round(times[-1] - started, 2)
    progress(
        f"{which} @ {nodes} nodes: {len(times)}/{len(pods)} bound, "
        f"{result.get('pods_per_second', float('nan'))} pods/s"
    )
    return result


def measure(
    bb: BenchBed,
    which: str,
    nodes: int,
    workload: Workload,
    progress: Progress,
    *,
    while_bound: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run the burst and the paced phase through one scheduler; return their figures.

    Args:
        bb: the running benchmark cluster.
        which: ``"baseline"`` (no extender), ``"phalanx"`` (the product's scheduler and extender) or
            ``SIDECAR`` (the framework sidecar; the caller resumes phalanx as shipped after it).
        nodes: the cluster size, for names and the report.
        workload: pod counts and the paced rate.
        progress: progress lines.
        while_bound: called after the burst, while its pods are still bound (the extender's per-call
            latency and RSS are measured then, on a cluster with real occupancy); its result is returned
            under ``"while_bound"``.
    """
    result: dict[str, Any] = {"scheduler": which, "nodes": nodes}
    scheduler = BASELINE_PROFILE if which == "baseline" else "phalanx"
    burst_ns = bb.namespace(f"perf-{which}-{nodes}-burst")
    paced_ns = bb.namespace(f"perf-{which}-{nodes}-paced")
    result.update(backlog(bb, which, nodes, burst_ns, workload.burst_pods, progress))
    if while_bound is not None:
        result["while_bound"] = while_bound()
    progress(f"{which} @ {nodes} nodes: deleting the backlog")
    bb.delete_pods(burst_ns)
    paced_settled = wait_for_idle_cpu(progress, what="the paced pods")
    if which == "baseline" and result.get("pods_per_second"):
        workload = replace(
            workload, paced_rate=min(workload.paced_rate, PACED_SHARE * result["pods_per_second"])
        )
    result["paced_rate"] = round(workload.paced_rate, 1)
    result.update(_paced(bb, paced_ns, scheduler, workload, progress, which, nodes))
    if paced_settled.busy:
        result.setdefault("paced_disturbed", paced_settled.busy_note("the paced pods"))
    bb.delete_pods(paced_ns)
    if which == "baseline":
        bb.stop_baseline()
    return result


def _paced(
    bb: BenchBed,
    namespace: str,
    scheduler: str,
    workload: Workload,
    progress: Progress,
    which: str,
    nodes: int,
) -> dict[str, Any]:
    pods = gpu_pods(scheduler, "p", workload.paced_pods)
    progress(f"{which} @ {nodes} nodes: {len(pods)} pods at {workload.paced_rate:g}/s for latency")
    sent: dict[str, float] = {}
    with BindWatch(bb.http, namespace) as watch:
        start = time.monotonic()
        for i, (name, pod) in enumerate(pods):
            delay = start + i / workload.paced_rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            sent[name] = time.monotonic()
            create_pod(bb.http, namespace, pod)
        created = time.monotonic()
        complete = watch.wait_bound(set(sent), timeout=120.0)
        latencies = [(watch.bound_at[n] - t) * 1000 for n, t in sent.items() if n in watch.bound_at]
    return {
        **({"paced_disturbed": "an end-to-end test run was running at its end"} if e2e_runs() else {}),
        "paced_pods": len(pods),
        "paced_rate_achieved": round(len(pods) / (created - start), 1) if created > start else float("nan"),
        "paced_complete": complete,
        "latency_ms": summary(latencies),
    }
