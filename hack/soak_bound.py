"""Bound: what share of GPUs an ideal scheduler keeps allocated while pods wait, on the soak's workload.

Not a test: it prints figures. The soak's goal is at least 95% of GPUs allocated at the seconds when
some pod has waited 5 s or more. How much of that any scheduler can reach depends on the workload: a
64-GPU gang waits until 64 GPUs are free at once, and those stay idle while it waits unless smaller
work fills them. This replays the soak's mix (``hack/soak_mix.py``: arrivals each second at the soak's
rate, the same sizes and 5-40 s runs, pods deleted early at the soak's rate) through an ideal
scheduler: first come first served with backfill (any waiting group that fits starts, oldest first),
best-fit nodes for single pods, gangs packed onto the fullest nodes, a group waiting 300 s keeping the
room it needs, and no latency at all, then again with a latency between a GPU freed and the next pod
bound on it (the soak's test bed spends it in the release pass, kube-scheduler, the extender's bind and
the watches between them). It is measured the way ``hack/soak_ledger.py`` measures the soak.
Run: ``.venv/bin/python hack/soak_bound.py [--minutes 30] [--rate 1000] [--nodes 64] [--seeds 1 2 3]
[--latency 0 0.25 0.5 1 1.5]``.
"""

from __future__ import annotations

import argparse
import heapq
import random
import statistics
from dataclasses import dataclass, field

from soak_mix import MIX

WAITED = 5.0
"""Seconds a pod waits before the second counts as "pods wait" (``soak_ledger.KEPT_AFTER``)."""
EARLY = 0.002
"""Chance per second that the soak deletes a running pod early (``soak._tidy``)."""
STARVE = 300.0
"""Seconds a group waits before it keeps the room it needs (``GateSettings.starve_after``)."""


@dataclass
class Group:
    """One arrival: ``gpus`` per pod for a single pod, or ``size`` one-GPU members of a gang."""

    created: float
    sizes: tuple[int, ...]
    seconds: float


@dataclass
class Pod:
    """A running pod: where, how many GPUs, when it ends; ``gone``: deleted early, its GPUs given back."""

    node: int
    gpus: int
    ends: float
    gone: bool = False


@dataclass
class Cluster:
    """Free GPUs per node, GPUs coming back (each ``latency`` after its pod ended), and the pods."""

    free: list[int]
    latency: float
    back: list[tuple[float, int, int]] = field(default_factory=list)  # (at, seq, pod id), a heap
    pods: dict[int, Pod] = field(default_factory=dict)
    seq: int = 0

    def place(self, group: Group, keep: int) -> list[tuple[int, int]] | None:
        """Where ``group``'s pods go with ``keep`` GPUs left alone, or ``None`` when it does not fit."""
        if sum(group.sizes) > sum(self.free) - keep:
            return None
        taken = list(self.free)
        where = []
        for size in sorted(group.sizes, reverse=True):
            fits = [n for n, free in enumerate(taken) if free >= size]
            if not fits:
                return None
            node = min(fits, key=lambda n: (taken[n], n))  # best fit; gangs thereby pack
            taken[node] -= size
            where.append((node, size))
        return where

    def start(self, node: int, gpus: int, ends: float) -> None:
        """Run a pod; its GPUs come back ``latency`` after it ends."""
        self.seq += 1
        self.free[node] -= gpus
        self.pods[self.seq] = Pod(node, gpus, ends)
        heapq.heappush(self.back, (ends + self.latency, self.seq, self.seq))

    def delete_early(self, pod_id: int, now: float) -> None:
        """The soak deletes a running pod: its GPUs come back ``latency`` from now."""
        pod = self.pods[pod_id]
        pod.gone, pod.ends = True, now
        self.seq += 1
        heapq.heappush(self.back, (now + self.latency, self.seq, -pod_id))

    def give_back(self, until: float) -> None:
        """Free the GPUs whose time to come back is ``until`` or before."""
        while self.back and self.back[0][0] <= until:
            _, _, pod_id = heapq.heappop(self.back)
            pod = self.pods.get(abs(pod_id))
            if pod is None or (pod.gone and pod_id > 0):
                continue  # deleted early: given back by its own entry
            self.free[pod.node] += pod.gpus
            del self.pods[abs(pod_id)]

    def held(self, now: float) -> int:
        """GPUs held by pods that have not ended."""
        return sum(p.gpus for p in self.pods.values() if p.ends > now)


def run(minutes: float, rate: float, nodes: int, seed: int, latency: float) -> tuple[float, float]:
    """(share allocated at the seconds pods waited, share over every second) of one run."""
    rng = random.Random(seed)
    cluster = Cluster([8] * nodes, latency)
    waiting: list[Group] = []
    per_second = rate / 60 / MIX.pods_per_arrival
    waited_shares, all_shares = [], []
    for second in range(int(minutes * 60)):
        now = float(second)
        for pod_id, pod in list(cluster.pods.items()):
            if pod.ends > now and rng.random() < EARLY:
                cluster.delete_early(pod_id, now)
        whole, part = divmod(per_second, 1)
        for _ in range(int(whole) + (rng.random() < part)):
            seconds = rng.uniform(*MIX.seconds)
            if rng.random() < MIX.single_share:
                waiting.append(Group(now, (rng.choice(MIX.single_gpus),), seconds))
            else:
                waiting.append(Group(now, (1,) * rng.choice(MIX.gang_sizes), seconds))
        _schedule(cluster, waiting, now, now + 1.0)
        share = cluster.held(now) / (8 * nodes)
        all_shares.append(share)
        if any(now - g.created >= WAITED for g in waiting):
            waited_shares.append(share)
    return statistics.fmean(waited_shares or [1.0]), statistics.fmean(all_shares)


def _schedule(cluster: Cluster, waiting: list[Group], now: float, until: float) -> None:
    """Start what fits at ``now``, and again each time GPUs come back before ``until``."""
    moment = now
    while True:
        cluster.give_back(moment)
        keep = 0
        for group in list(waiting):
            where = cluster.place(group, keep)
            if where is None:
                if moment - group.created >= STARVE and not keep:
                    keep = sum(group.sizes)
                continue
            waiting.remove(group)
            for node, gpus in where:
                cluster.start(node, gpus, moment + group.seconds)
        if not cluster.back or cluster.back[0][0] >= until:
            return
        moment = cluster.back[0][0]


def main() -> None:
    """Print the share for each latency, each seed and their mean."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="pods a minute, about")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.25, 0.5, 1.0, 1.5])
    args = parser.parse_args()
    print(
        f"{args.nodes} nodes of 8 GPUs, {args.rate:g} pods a minute, {args.minutes:g} minutes, "
        f"seeds {args.seeds}"
    )
    print(" latency  allocated while pods waited (per seed)        over every second")
    for latency in args.latency:
        runs = [run(args.minutes, args.rate, args.nodes, seed, latency) for seed in args.seeds]
        waited = [w for w, _ in runs]
        overall = statistics.fmean(a for _, a in runs)
        each = " ".join(f"{w:.1%}" for w in waited)
        print(f"  {latency:5.2f}s  {statistics.fmean(waited):6.1%} ({each})  {overall:14.1%}")


if __name__ == "__main__":
    main()
