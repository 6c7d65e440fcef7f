"""Benchmark: one release pass of the placement manager over 1,000 gated pods on a busy cluster.

Not a test: it prints figures. The pass is the real one (``placement.release_pass.ReleasePass`` over a
``kubeio.cluster_cache.ClusterCache`` fed with Pod JSON as the watch delivers it, the queue view shared as
in production); only the API server is replaced: ungating and binding are applied to the cache as the
watch would report them. Between passes the cluster churns as the soak's does: each released pod is bound
first-fit (kube-scheduler's part), a share of the running pods finish, and new gated pods arrive so that
``--gated`` pods wait at every pass (single pods of 1-8 GPUs and gangs of 2-64 one-GPU members, three
queues). Each row prints the deciding part of a pass (snapshot, queue view of the new version, the core)
and the whole pass (with the ungate calls, which cost nothing here). Each size runs twice, in one run: with
the placement manager's collector policy between passes (``kubeio.collector``, as the release loop
runs it) and with Python's collector as it comes, whose full collections land inside passes.
Run: ``.venv/bin/python hack/bench_release.py [--nodes 64 500 1000] [--gated 1000] [--passes 60]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from kubeio.cluster_cache import ClusterCache
from kubeio.collector import Collector
from placement.release_pass import ReleasePass
from placement.views import SharedView
from scheduling.admission.release import GateSettings
from scheduling.model import ADMISSION_GATE, Pod
from scheduling.topology import TopologyCache
from testbed.nodes import SimNodeSpec, node_object, status_patch

QUEUES = ("team-a", "team-b", "team-c")
T0 = 1_800_000_000.0


class NoEvents:
    """Events go nowhere: the bench measures deciding."""

    def record(self, *_: object) -> None:
        """Drop it."""

    def record_now(self, *_: object) -> None:
        """Drop it (an action's event, written before the action in production)."""


@dataclass
class World:
    """The cache and what the bench's kube-scheduler and kubelet know of it."""

    cache: ClusterCache
    rng: random.Random
    free: dict[str, list[int]]
    raw: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod key -> its JSON
    running: list[str] = field(default_factory=list)
    seq: int = 0

    def put(self, body: dict[str, Any]) -> None:
        """Deliver ``body`` to the cache as the watch would (added or modified)."""
        meta = body["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        kind = "MODIFIED" if key in self.raw else "ADDED"
        meta["resourceVersion"] = str(self.seq)
        self.seq += 1
        self.raw[key] = body
        self.cache.pod_event(kind, body)

    def ungate(self, pod: Pod, annotations: Mapping[str, str] = MappingProxyType({})) -> bool:
        """The ungate patch, as the cache sees it come back."""
        body = self.raw[pod.key]
        body["spec"]["schedulingGates"] = []
        if annotations:
            body["metadata"].setdefault("annotations", {}).update(annotations)
        self.put(body)
        return True

    def arrive(self, now: float) -> int:
        """One arrival of the soak's mix, gated; returns its pods."""
        self.seq += 1
        queue = self.rng.choice(QUEUES)
        if self.rng.random() < 0.7:
            self.put(_pod(f"p{self.seq}", self.rng.choice((1, 1, 1, 2, 2, 4, 8)), queue, now))
            return 1
        size = self.rng.choice((2, 2, 4, 4, 8, 16, 32, 64))
        name = f"g{self.seq}"
        self.cache.podgroup_event("ADDED", _podgroup(name, size))
        for i in range(size):
            self.put(_pod(f"{name}-{i}", 1, queue, now, group=name))
        return size

    def schedule(self) -> None:
        """kube-scheduler's part: every ungated, unbound pod goes to the first node with room."""
        for key, body in list(self.raw.items()):
            if body["spec"].get("schedulingGates") or body["spec"].get("nodeName"):
                continue
            need = int(body["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
            node = next((n for n, free in self.free.items() if len(free) >= need), None)
            if node is None:
                continue
            gpus, self.free[node] = self.free[node][:need], self.free[node][need:]
            body["spec"]["nodeName"] = node
            body["metadata"]["annotations"]["phalanx.io/gpus"] = ",".join(map(str, gpus))
            body["status"] = {"phase": "Running"}
            self.put(body)
            self.running.append(key)

    def finish(self, share: float) -> None:
        """The kubelet's part: a share of the running pods finish and are deleted."""
        self.rng.shuffle(self.running)
        done, self.running = (
            self.running[: int(len(self.running) * share)],
            self.running[int(len(self.running) * share) :],
        )
        for key in done:
            body = self.raw.pop(key)
            gpus = body["metadata"]["annotations"]["phalanx.io/gpus"]
            self.free[body["spec"]["nodeName"]] += [int(g) for g in gpus.split(",")]
            self.cache.pod_event("DELETED", body)

    def gated(self) -> int:
        """Pods still gated."""
        return sum(1 for body in self.raw.values() if body["spec"].get("schedulingGates"))


def _pod(name: str, gpus: int, queue: str, now: float, *, group: str | None = None) -> dict[str, Any]:
    labels = {"phalanx.io/queue": queue, **({"scheduling.x-k8s.io/pod-group": group} if group else {})}
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return {
        "metadata": {"uid": f"uid-{name}", "namespace": "bench", "name": name, "labels": labels,
                     "annotations": {}, "creationTimestamp": created},
        "spec": {"schedulerName": "phalanx", "schedulingGates": [{"name": ADMISSION_GATE}],
                 "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": "Pending"},
    }  # fmt: skip


def _podgroup(name: str, size: int) -> dict[str, Any]:
    return {
        "metadata": {"uid": f"uid-pg-{name}", "namespace": "bench", "name": name, "resourceVersion": "1"},
        "spec": {"minMember": size},
    }


def _queue(name: str, quota: int) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {"resources": {"nvidia.com/gpu": {"quota": quota, "overQuotaWeight": 1}}},
    }


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(
    nodes: int, gated: int, passes: int, seed: int, *, settle: bool
) -> tuple[list[float], list[float], int]:
    """Decide and whole-pass seconds of ``passes`` passes, and the pods released in all.

    ``settle``: between passes, the placement manager's collector policy (``Collector.settle``).
    """
    gc.collect()  # what an earlier row left is not this row's to collect
    collector = Collector(time.monotonic) if settle else None
    rng = random.Random(seed)
    cache = ClusterCache()
    specs = [SimNodeSpec(f"node-{i:05d}", gpus=8) for i in range(nodes)]
    raws = []
    for spec in specs:
        raw = node_object(spec)
        raw["status"] = status_patch(spec, "2026-11-22T00:00:00Z")["status"]
        raws.append(raw)
    cache.replace_nodes(raws)
    cache.replace_queues([_queue(q, nodes * 8 // 4) for q in QUEUES])
    world = World(cache, rng, {s.name: list(range(8)) for s in specs})
    now = [T0]
    releaser = ReleasePass(
        cache,
        world,
        NoEvents(),
        clock=lambda: now[0],
        topologies=TopologyCache(),
        settings=GateSettings(),
        views=SharedView(),
    )
    while world.gated() < gated:  # fill the cluster and the backlog before measuring
        world.arrive(now[0])
        if world.gated() >= gated // 2:
            releaser.run()
            world.schedule()
    decide, whole, released = [], [], 0
    for _ in range(passes):
        now[0] += 1.0
        world.finish(0.05)
        while world.gated() < gated:
            world.arrive(now[0])
        started = time.perf_counter()
        outcome = releaser.run()
        whole.append(time.perf_counter() - started)
        decide.append(outcome.decide_seconds)
        released += sum(1 for _ in outcome.released)
        if collector is not None:
            collector.settle()
        world.schedule()
    gc.unfreeze()
    return decide, whole, released


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[64, 500, 1000])
    parser.add_argument("--gated", type=int, default=1000)
    parser.add_argument("--passes", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; ")
    print(f"{args.gated} gated pods at each of {args.passes} passes a row; 5% of running pods end between")
    head = f"{'nodes':>6}  {'collector':>14}  {'decide p50':>10}  {'decide p99':>10}  {'pass p99':>9}"
    print(f"{head}  {'groups released':>15}")
    for count in args.nodes:
        for settle in (True, False):
            decide, whole, released = run(count, args.gated, args.passes, args.seed, settle=settle)
            p50, p99, whole99 = statistics.median(decide), percentile(decide, 0.99), percentile(whole, 0.99)
            how = "as shipped" if settle else "as it comes"
            goal = f"   goal pass p99 <= 100 ms: {'met' if whole99 <= 0.1 else 'MISSED'}" if settle else ""
            print(
                f"{count:>6}  {how:>14}  {1000 * p50:8.1f}ms  {1000 * p99:8.1f}ms  {1000 * whole99:7.1f}ms"
                f"  {released:>15}{goal}"
            )


if __name__ == "__main__":
    main()
