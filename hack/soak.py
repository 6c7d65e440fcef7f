"""Soak: a mixed workload through the real scheduler for N minutes, with what drifts printed every minute.

The goal is weeks of uptime without drift. This starts its own test bed (control plane,
kube-scheduler with the extender, placement manager, simulated kubelet, ``--nodes`` simulated 8-GPU
nodes, three queues) and drives, for ``--minutes``, about ``--rate`` pods a minute: single pods of 1-8
GPUs and gangs of 2-64 one-GPU members, in three queues, running a random 5-40 s each
(``phalanx.io/sim-duration-seconds``), some deleted at random before they end; finished pods and their
PodGroups are deleted as a job controller with a TTL would. Every minute and at the end it prints the
pods bound now and the GPUs they hold, gangs bound in part (some members on a node, others waiting for
one) for longer than their timeout, GPU indices held twice, the extender's
promises and reservations outstanding, and the RSS and open file descriptors of the extender's worker
and of the placement manager. The goal (not a test): over 30 minutes, memory growth under 5% after the
first 10 minutes (peak against peak), 0 partial gangs past timeout, 0 double GPUs, 0 promises left
once the work drains.
With admission gates (the default, as the manifests ship): pods are created gated and released by
the placement manager; each report also says how many pods wait gated and the median seconds from
creation to scheduled of the pods scheduled in the last minute. ``--no-gates`` runs the extender alone.
Every minute it also prints the share of the GPUs held while pods waited, and pods lost; at the end the
whole run's share (goal: >= 95%) with the idle GPUs split by the rule that kept them, and the memory
growth of every process after its first ten minutes, peak against peak (``hack/soak_ledger.py``).
With ``--faults`` it runs the high-availability configuration the manifests ship and kills leaders,
deletes nodes and breaks a Queue on a timetable (``hack/soak_faults.py``), and prints the timeline at the end.
Run: ``hack/soak --minutes 30 [--rate 1000] [--nodes 64] [--seed 1] [--no-gates] [--faults]``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the checkout: testbed/ is not installed

from localbed import PLACEMENT_REPLICAS, Testbed
from soak_faults import FaultPlan, Faults
from soak_ledger import Ledger, leader_metrics, product_processes, serving
from soak_mix import MIX
from workload import (
    PODGROUPS,
    create_pod,
    create_podgroup,
    create_queue,
    double_booked,
    ensure_namespace,
    gpu_pod,
    list_pods,
    member,
    metric_value,
    podgroup,
    queue,
    scrape,
)

from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject
from scheduling.timestamps import seconds
from testbed.nodes import fleet

NAMESPACE = "soak"
QUEUES = ("team-a", "team-b", "team-c")
GANG_TIMEOUT = 60
GOAL_SHARE = 0.95
"""GPUs allocated while pods wait, at least (the reliability goal of the release pass)."""
GOAL_GROWTH = 5.0
"""Memory growth of any process after its first ten minutes, at most, in percent."""


@dataclass
class Load:
    """What the driver created and deleted, and the gangs it watches."""

    created: int = 0
    deleted_early: int = 0
    gangs: dict[str, tuple[int, float]] = field(default_factory=dict)  # name -> (size, created at)
    partial_since: dict[str, float] = field(default_factory=dict)  # gang -> bound in part since
    seq: int = 0
    ledger: Ledger = field(default_factory=Ledger)
    worst_partial: int = 0
    worst_double: int = 0


def _fds(pid: int) -> int:
    """Open descriptors of a process (0 when it is gone)."""
    try:
        return len(list(Path(f"/proc/{pid}/fd").iterdir()))
    except OSError:
        return 0


def _threads(pid: int) -> int:
    """Threads of a process (0 when it is gone): a pool that grows with load grows its memory too."""
    try:
        found = re.search(r"Threads:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())
    except OSError:
        return 0
    return int(found.group(1)) if found else 0


def _submit(bed: Testbed, load: Load, rng: random.Random, pool: ThreadPoolExecutor) -> None:
    """One arrival: a single pod (70%) or a gang of 2-64 one-GPU members (30%), in a random queue."""
    load.seq += 1
    labels = {"phalanx.io/queue": rng.choice(QUEUES)}
    duration = {"phalanx.io/sim-duration-seconds": f"{rng.uniform(*MIX.seconds):.1f}"}
    if rng.random() < MIX.single_share:
        pod = gpu_pod(f"p{load.seq}", rng.choice(MIX.single_gpus), annotations=duration)
        pod["metadata"]["labels"] = labels
        pods = [pod]
    else:
        size = rng.choice(MIX.gang_sizes)
        name = f"g{load.seq}"
        create_podgroup(bed.http, NAMESPACE, podgroup(name, size, timeout_seconds=GANG_TIMEOUT))
        pods = [member(f"{name}-{i}", name, 1, annotations=duration) for i in range(size)]
        for pod in pods:
            pod["metadata"]["labels"].update(labels)
        load.gangs[name] = (size, time.monotonic())
    list(pool.map(lambda body: create_pod(bed.http, NAMESPACE, body), pods))  # as a controller would: at once
    load.created += len(pods)
    load.ledger.created |= {p["metadata"]["name"] for p in pods}


def _tidy(
    bed: Testbed, pods: list[JsonObject], load: Load, rng: random.Random, pool: ThreadPoolExecutor
) -> None:
    """Delete finished pods, a few running ones at random, and the PodGroups of gangs with no pod left."""
    doomed, alive_groups = [], set()
    for pod in pods:
        meta = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase")
        early = phase == "Running" and rng.random() < 0.002
        if phase in ("Succeeded", "Failed") or early:
            doomed.append(str(meta["name"]))
            load.deleted_early += early
        else:
            group = (meta.get("labels") or {}).get("scheduling.x-k8s.io/pod-group")
            if group:
                alive_groups.add(group)

    def delete(path: str) -> None:
        with contextlib.suppress(NotFoundError):
            bed.http.request("DELETE", path)

    load.ledger.deleted_by_soak |= set(doomed)
    paths = [f"/api/v1/namespaces/{NAMESPACE}/pods/{name}" for name in doomed]
    gone = sorted(g for g in load.gangs if g not in alive_groups)
    paths += [PODGROUPS.format(namespace=NAMESPACE) + f"/{g}" for g in gone]
    list(pool.map(delete, paths))
    for group in gone:
        load.gangs.pop(group, None)


def _track_partial(pods: list[JsonObject], load: Load) -> None:
    """Note since when each gang has been bound in part: some members on a node, others waiting for one.

    A member that finished or that the driver deleted is neither: a gang the driver cut short is the
    placement manager's to evict (stale gangs), not a scheduling failure. Called every second.
    """
    bound: dict[str, int] = {}
    waiting: dict[str, int] = {}
    for pod in pods:
        group = (pod["metadata"].get("labels") or {}).get("scheduling.x-k8s.io/pod-group")
        if not group or pod["metadata"].get("deletionTimestamp"):
            continue
        counts = bound if pod["spec"].get("nodeName") else waiting
        counts[group] = counts.get(group, 0) + 1
    now = time.monotonic()
    partial = {g for g in bound if waiting.get(g)}
    load.partial_since = {g: load.partial_since.get(g, now) for g in sorted(partial)}


def _partial_past_timeout(load: Load) -> list[str]:
    """Gangs bound in part for longer than their timeout (should be none)."""
    now = time.monotonic()
    return sorted(g for g, since in load.partial_since.items() if now - since > GANG_TIMEOUT)


def _gpus_bound(pods: list[JsonObject]) -> int:
    """GPUs requested by the pods on a node that have not finished (what the cluster runs now)."""
    total = 0
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        if pod["spec"].get("nodeName") and phase not in ("Succeeded", "Failed"):
            for container in pod["spec"].get("containers") or []:
                total += int(
                    ((container.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu", 0)
                )
    return total


def _scheduled_p50(pods: list[JsonObject], now: float) -> str:
    """Median seconds from creation to ``PodScheduled`` of pods scheduled in the last minute (1 s steps)."""
    waits = []
    for pod in pods:
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
                at = seconds(str(cond.get("lastTransitionTime") or ""))
                created = seconds(str(pod["metadata"].get("creationTimestamp") or ""))
                if at is not None and created is not None and now - at <= 60:
                    waits.append(at - created)
    return f"{statistics.median(waits):.0f}s" if waits else "n/a"


def _release_passes(bed: Testbed) -> str:
    """The placement manager's release passes so far and their mean duration ("" without gates)."""
    port = bed.placement_metrics_ports.get("placement")
    if not port or not bed.admission_gates:
        return ""
    try:
        page = scrape(f"http://127.0.0.1:{port}/metrics")
    except OSError:
        return ""
    count = metric_value(page, "phalanx_admission_pass_seconds_count") or 0.0
    total = metric_value(page, "phalanx_admission_pass_seconds_sum") or 0.0
    return f", {count:.0f} release passes of {1000 * total / count:.0f} ms on average" if count else ""


def _report(bed: Testbed, minute: float, load: Load, pods: list[JsonObject], lost: list[str]) -> str:
    bound = sum(1 for p in pods if p["spec"].get("nodeName"))
    gated = sum(1 for p in pods if p["spec"].get("schedulingGates"))
    scheduled = _scheduled_p50(pods, time.time())
    try:
        page = scrape(f"{bed.extender_url}/metrics")
    except OSError:
        page = ""
    promises = metric_value(page, "phalanx_extender_open_promises") or 0.0
    reservations = metric_value(page, "phalanx_gang_reservations") or 0.0
    decisions = metric_value(page, "phalanx_extender_decisions_kept") or 0.0
    blocks = (metric_value(page, "phalanx_extender_python_allocated_blocks") or 0.0) / 1e6
    passes = _release_passes(bed)
    partial = _partial_past_timeout(load)
    doubles = double_booked(pods)
    load.worst_partial = max(load.worst_partial, len(partial))
    load.worst_double = max(load.worst_double, len(doubles))
    processes = product_processes(bed, PLACEMENT_REPLICAS)
    memory = ", ".join(f"{n} {load.ledger.last_mib(n, pid):.0f} MiB {_fds(pid)} fds "
                       f"{_threads(pid)} threads" for n, pid in sorted(processes.items()))  # fmt: skip
    rate = load.created / max(minute, 1e-9)
    return (
        f"[{minute:5.1f} min] created {load.created} ({rate:.0f}/min), live {len(pods)}, bound now {bound} "
        f"holding {_gpus_bound(pods)} GPUs, gated {gated}, created->scheduled p50 {scheduled}, "
        f"GPUs held while pods waited {load.ledger.minute_share()}, "
        f"deleted early {load.deleted_early}; partial gangs past timeout {len(partial)}"
        f"{' (' + ', '.join(partial[:3]) + ')' if partial else ''}; "
        f"double GPUs {len(doubles)}{_listed(doubles)}; pods lost {len(lost)}{_listed(lost)}; "
        f"promises {promises:g}, reservations {reservations:g}, decisions kept {decisions:g}; "
        f"{blocks:.2f}M extender Python blocks; {memory}{passes}"
    )


def _listed(names: list[str]) -> str:
    return f" ({', '.join(names[:3])})" if names else ""


def _summary(load: Load, faults: Faults | None, lost: list[str], capacity: int) -> list[str]:
    """The end of the run: each figure against its goal, the idle GPUs by rule, the faults' timeline."""
    share = load.ledger.share()
    growth = load.ledger.worst_growth()
    held = "n/a" if share is None else f"{100 * share:.1f}%"
    overall = load.ledger.overall()
    busy = "n/a" if overall is None else f"{100 * overall:.1f}%"
    share_goal = "met" if share is not None and share >= GOAL_SHARE else "MISSED"
    growth_goal = "met" if growth < GOAL_GROWTH else "MISSED"
    shown = f" {', '.join(lost[:10])}" if lost else ""
    lines = [
        "-- summary",
        f"GPUs allocated while pods waited: {held} of {capacity} "
        f"(goal >= {100 * GOAL_SHARE:.0f}%: {share_goal}); over every second of the run: {busy}",
        f"GPUs idle while pods waited, mean by rule: {load.ledger.idle_breakdown()}",
        f"partial gangs past timeout, worst minute: {load.worst_partial}; GPU indices held twice, worst "
        f"minute: {load.worst_double}; pods lost: {len(lost)}{shown}",
        f"memory growth after each process's first 10 minutes (5-minute peaks), worst {growth:+.1f}% "
        f"(goal < {GOAL_GROWTH:.0f}%: {growth_goal})",
        *(f"  {line}" for line in load.ledger.memory_growth()),
    ]
    if faults is not None:
        lines += ["-- fault timeline", *faults.timeline]
        lines.append(
            f"pods that were on a deleted node (the pod garbage collector's): {len(faults.on_lost_node)}"
        )
        late = sorted(faults.bound_after_delete)
        lines.append(
            f"pods bound to a node after its deletion was answered (phalanx's to prevent): {len(late)}"
            + (f" {late[:10]}" if late else "")
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="pods a minute, about")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--gates", action=argparse.BooleanOptionalAction, default=True, help="admission gates (default on)"
    )
    parser.add_argument("--faults", action="store_true", help="kill leaders, lose nodes, break a Queue")
    parser.add_argument("--kill-every", type=float, default=15.0, help="minutes between leader kills")
    parser.add_argument("--node-every", type=float, default=10.0, help="minutes between node losses")
    parser.add_argument("--bad-queue-at", type=float, default=20.0, help="minute of the broken Queue")
    args = parser.parse_args()
    # SIGTERM and SIGINT end the run through the ``finally`` below, which stops every process of the
    # test bed (a plain SIGTERM would leave the control plane running).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    rng = random.Random(args.seed)
    load = Load()
    pool = ThreadPoolExecutor(8, thread_name_prefix="soak")
    with tempfile.TemporaryDirectory(prefix="phalanx-soak-") as state:
        bed = Testbed(
            Path(state),
            # INFO: every bind's GPUs and every gang recovery are logged, so that a double booking the
            # soak reports can be traced in the logs it keeps (a line per bind, about 1,000 a minute).
            extender_env={"PHALANX_LOG_LEVEL": "INFO"},
            admission_gates=args.gates,
            scheduler_pairs=2 if args.faults else 1,
            placement_replicas=2 if args.faults else 1,
        )
        nodes = fleet(args.nodes, gpus=8, racks_per_zone=4)
        faults: Faults | None = None
        try:
            bed.start()
            bed.add_nodes(nodes)
            ensure_namespace(bed.http, NAMESPACE)
            for name in QUEUES:
                create_queue(bed.http, queue(name, quota=args.nodes * 8 // 4, weight=1))
            if args.faults:
                plan = FaultPlan(args.kill_every, args.node_every, args.bad_queue_at)
                faults = Faults(bed, nodes, NAMESPACE, plan, random.Random(args.seed + 1))
            start = time.monotonic()
            next_report = start + 60
            arrivals_per_second = args.rate / 60 / MIX.pods_per_arrival
            replicas = bed.placement_replicas
            lost: list[str] = []
            while time.monotonic() - start < args.minutes * 60:
                tick = time.monotonic()
                if faults is not None:
                    faults.tick()
                whole, part = divmod(arrivals_per_second, 1)
                for _ in range(int(whole) + (rng.random() < part)):
                    _submit(bed, load, rng, pool)
                try:
                    pods = list_pods(bed.http, NAMESPACE)
                    if faults is not None:
                        faults.note(pods)
                    capacity = 8 * len(bed.http.request("GET", "/api/v1/nodes").get("items") or [])
                    load.ledger.sample(pods, capacity, leader_metrics(bed, replicas), time.time())
                    _tidy(bed, pods, load, rng, pool)
                    _track_partial(pods, load)
                except KubeError as exc:
                    print(f"tidy failed: {exc}", flush=True)
                    pods = []
                if time.monotonic() >= next_report:
                    next_report += 60
                    load.ledger.collect_evictions(bed, NAMESPACE)
                    processes = product_processes(bed, replicas)
                    load.ledger.remember_memory(processes, serving(bed, replicas, load.ledger))
                    on_lost_node = faults.on_lost_node if faults is not None else set()
                    lost = load.ledger.lost({p["metadata"]["name"] for p in pods}, on_lost_node)
                    print(_report(bed, (time.monotonic() - start) / 60, load, pods, lost), flush=True)
                time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
            print("-- drained: no new work for 90 s", flush=True)
            drain_end = time.monotonic() + 90
            while time.monotonic() < drain_end:
                pods = list_pods(bed.http, NAMESPACE)
                _tidy(bed, pods, load, rng, pool)
                time.sleep(2)
            pods = list_pods(bed.http, NAMESPACE)
            load.ledger.sample(pods, 0, None, time.time())
            load.ledger.collect_evictions(bed, NAMESPACE)
            on_lost_node = faults.on_lost_node if faults is not None else set()
            lost = load.ledger.lost({p["metadata"]["name"] for p in pods}, on_lost_node)
            print(_report(bed, (time.monotonic() - start) / 60, load, pods, lost), flush=True)
            for line in _summary(load, faults, lost, 8 * args.nodes):
                print(line, flush=True)
        finally:
            bed.stop()
            if load.worst_double or load.worst_partial or load.ledger.lost_any:
                kept = Path(tempfile.mkdtemp(prefix="phalanx-soak-logs-"))
                shutil.copytree(Path(state) / "logs", kept / "logs")
                print(f"-- something went wrong: the processes' logs are kept in {kept / 'logs'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
