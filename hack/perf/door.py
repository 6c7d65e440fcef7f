"""The gate's door in sidecar mode: one decision's cost against the pods released and not yet bound.

With plans carried on pods (the framework sidecar), every decision of the gate, the door's at a pod's
creation and each release pass's, holds each pod released and not yet bound at its plan
(``scheduling.admission.replan.hold_plans``) and counts them against the room and the queues. They are
kept per pod change (``scheduling.cluster.ledger.PodLedger``, the pending groups by
``scheduling.queues.lines.PendingLines``, the held rooms by ``scheduling.cluster.held.HeldPlans``), so
that a decision does not grow with them as it did, and the in-flight budget no longer applies with plans
(docs/design/framework-sidecar.md, "What the gate costs"). This section times ``decide_at_door`` on the
placement manager's real ``ClusterCache`` at 1,000 nodes with 0 to 3,000 sealed, unbound plans in
flight, alone and as the manager pays it per created pod (the queue view brought up to date first), so
what still grows with them has its figure.

Worker: ``python -m perf.door --nodes N --flight A,B,C --calls C`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from kubeio.cluster_cache import ClusterCache
from kubeio.convert import pod_from_api
from kubeio.plan_seal import PlanSeal
from perf.bed import topology_documents
from perf.common import Progress, subprocess_env
from perf.decision import percentiles
from perf.memory import _node
from perf.requests import probe_pod
from scheduling.admission.door import decide_at_door
from scheduling.admission.flight import ReleasedBook
from scheduling.admission.outcome import GateSettings, Released
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import StatementChain
from scheduling.queues.tally import QueueTally
from scheduling.queues.view import QueueView
from scheduling.topology import TopologyCache

IN_FLIGHT = (0, 256, 1000, 3000)
"""Pods in flight the section times the door at: none, the default budget's 256 pods, and a backlog."""

NOW = 1_795_000_000.0
"""The clock the worker decides at (in-flight pods were released a second before)."""


def _flying(i: int, node: str, gpu: int, seal: PlanSeal) -> dict[str, Any]:
    """Pod ``i``, released with a sealed plan on ``node`` GPU ``gpu`` and not bound yet.

    Its status is a new pod's: kube-scheduler has not tried it yet (the probe's status, captured from a
    filter call, says kube-scheduler turned it down once, which a pod let in with its plan has not been).
    """
    raw = probe_pod(f"flight-{i:05d}", 1, namespace="perf-door")
    raw["metadata"]["annotations"] = seal.annotations(f"perf-door/flight-{i:05d}", node, (gpu,), NOW - 1)
    raw["status"] = {"phase": "Pending"}
    return raw


def worker(nodes: int, flights: Sequence[int], calls: int) -> dict[str, Any]:
    """Time ``calls`` door decisions for a one-GPU pod at each count of pods in flight.

    Two figures per count: the decision alone on one snapshot (``in_flight``), and what the placement
    manager pays per created pod (``as_created``): a pod let in before it reaches the cache (the state
    moves a version), the queue view brought up to date (``QueueTally``, as ``placement.views`` does),
    then the decision.
    """
    seal = PlanSeal(b"perf-door-key-" * 4)
    documents = topology_documents()
    raw_nodes = [_node(i, documents) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in raw_nodes]
    out: dict[str, Any] = {"nodes": nodes, "calls": calls, "in_flight": {}, "as_created": {}}
    settings = GateSettings(plan_on_pod=True, max_unbound_gpus=10**6, max_unbound_pods=10**6)
    pod = pod_from_api(probe_pod("door-new", 1, namespace="perf-door"))

    def decide(snapshot: ClusterSnapshot, view: QueueView, book: ReleasedBook, chain: StatementChain) -> None:
        answer = decide_at_door(
            snapshot, PromiseBook(), view, book, pod, TopologyCache(), now=NOW, settings=settings, chain=chain
        )
        if not isinstance(answer, Released):
            msg = f"the door gated the probe pod at {len(book.at)} in flight: {answer}"
            raise RuntimeError(msg)

    for flight in flights:
        cache = ClusterCache(plan_check=seal.sealed_at)
        cache.replace_nodes(raw_nodes)
        cache.replace_pods([_flying(i, names[i // 8 % nodes], i % 8, seal) for i in range(flight)])
        snapshot = cache.snapshot()
        tally = QueueTally()
        view = tally.view(snapshot)
        book = ReleasedBook().with_released([f"perf-door/flight-{i:05d}" for i in range(flight)], NOW - 1)
        chain, times = StatementChain(), []
        for n in range(calls + 5):
            start = time.perf_counter()
            decide(snapshot, view, book, chain)
            if n >= 5:  # the first calls fill the memos
                times.append((time.perf_counter() - start) * 1000)
        out["in_flight"][str(flight)] = percentiles(times)
        times = []
        for n in range(calls + 5):
            i = flight + n
            cache.pod_event("ADDED", _flying(i, names[i // 8 % nodes], i % 8, seal))
            book = book.with_released([f"perf-door/flight-{i:05d}"], NOW - 1)
            start = time.perf_counter()
            snapshot = cache.snapshot()
            decide(snapshot, tally.view(snapshot), book, chain)
            if n >= 5:
                times.append((time.perf_counter() - start) * 1000)
        out["as_created"][str(flight)] = percentiles(times)
    return out


def measure_door(nodes: int, calls: int, progress: Progress, timeout: float = 900.0) -> dict[str, Any]:
    """Run the worker in a fresh interpreter and return its report (or the error)."""
    progress(f"door: decide_at_door in-process at {nodes} nodes, {calls} calls per count in flight")
    argv = [sys.executable, "-m", "perf.door", "--nodes", str(nodes), "--calls", str(calls)]
    argv += ["--flight", ",".join(map(str, IN_FLIGHT))]
    proc = subprocess.run(
        argv, capture_output=True, text=True, env=subprocess_env(), timeout=timeout, check=False
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]}
    report: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
    for flight, figures in report["in_flight"].items():
        created = report.get("as_created", {}).get(flight, {})
        progress(
            f"  {flight} in flight: p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms;"
            f" as created (view and decision) p50 {created.get('p50_ms', 0.0):.2f} ms"
        )
    return report


def render_door(results: dict[str, Any]) -> list[str]:
    """The section's table: the door's cost by pods in flight, and each p50 over the first's."""
    report = results.get("door")
    if not isinstance(report, dict):
        return []
    if "error" in report:
        return [f"\nDoor decision in sidecar mode: {report['error']}"]
    rows: dict[str, dict[str, float]] = report.get("in_flight") or {}
    created: dict[str, dict[str, float]] = report.get("as_created") or {}
    first = next(iter(rows.values()), {}).get("p50_ms") or 0.0
    lines = [f"\nDoor decision in sidecar mode, in-process, {report.get('nodes', 0):,} nodes (ms)"]
    lines.append(
        f"  {'in flight':>9}  {'p50':>7}  {'p99':>7}  {'p50 / none in flight':>20}"
        f"  {'as created: p50':>15}  {'p99':>7}"
    )
    for flight, figures in rows.items():
        ratio = f"{figures['p50_ms'] / first:.1f}x" if first else "-"
        also = created.get(flight)
        p50, p99 = (f"{also['p50_ms']:.2f}", f"{also['p99_ms']:.2f}") if also else ("-", "-")
        row = f"  {flight:>9}  {figures['p50_ms']:7.2f}  {figures['p99_ms']:7.2f}  {ratio:>20}"
        lines.append(f"{row}  {p50:>15}  {p99:>7}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the worker subprocess."""
    parser = argparse.ArgumentParser(
        description="in-process cost of one door decision against pods in flight"
    )
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--flight", default=",".join(map(str, IN_FLIGHT)))
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args(argv)
    flights = [int(x) for x in args.flight.split(",") if x]
    print(orjson.dumps(worker(args.nodes, flights, args.calls)).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
