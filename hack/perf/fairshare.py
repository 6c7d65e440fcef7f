"""Section 4: fair-share recompute time against the number of queues and of pending groups.

Times the public functions of ``scheduling.queues`` in-process on generated queue trees and pending
groups: ``QueueTree.build`` (validation of the whole set), ``fair_shares`` (quota first, then weights,
per level), ``queue_states`` and ``order_pending`` (the order in which pending groups get their turn).
Each case runs in its own subprocess with a time limit, because the cost of ordering grows with
queues x groups and one slow case must not hold up the rest of the run; a case that runs out of time
reports the steps it finished and which one it was in.

``scheduling.queues`` was being written while this harness was; it is imported by name, and if it is
missing or its functions do not take these arguments the section says "not available" with the reason.

Worker: ``python -m perf.fairshare --queues Q --groups G`` prints one JSON line per finished step.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from perf.common import Progress, subprocess_env

CAPACITY_NODES = 5000
"""The generated cluster: 5,000 nodes of 8 GPUs, 64 cores and 512 GiB (the issue's largest size)."""

LEAVES_PER_DEPARTMENT = 10
"""With more than this many queues, leaves are grouped under departments (a two-level tree)."""


def availability() -> str:
    """Empty if ``scheduling.queues`` imports and has the functions timed here, else the reason."""
    try:
        queues = importlib.import_module("scheduling.queues")
    except Exception as exc:  # any import-time failure of work in progress means "not available"
        return f"scheduling.queues does not import: {type(exc).__name__}: {exc}"
    missing = [
        name
        for name in (
            "Queue",
            "QueueTree",
            "ResourceQuota",
            "PendingGroup",
            "fair_shares",
            "queue_states",
            "order_pending",
        )
        if not hasattr(queues, name)
    ]
    return f"scheduling.queues has no {', '.join(missing)}" if missing else ""


def _inputs(queues: int, groups: int) -> dict[str, Any]:
    """Build the queue set, capacity, demand, allocation and pending groups of one case."""
    q: Any = importlib.import_module("scheduling.queues")
    model: Any = importlib.import_module("scheduling.model")
    resources = model.Resources
    gib = 2**30
    capacity = resources(
        milli_cpu=CAPACITY_NODES * 64_000, memory=CAPACITY_NODES * 512 * gib, gpus=CAPACITY_NODES * 8
    )
    leaf_quota = max(1, capacity.gpus // (2 * queues))  # half the cluster is guaranteed, the rest borrowed
    leaves = [f"team-{i:04d}" for i in range(queues)]
    departments = (
        []
        if queues <= LEAVES_PER_DEPARTMENT
        else [f"dept-{d:03d}" for d in range(-(-queues // LEAVES_PER_DEPARTMENT))]
    )
    parent_of = {
        leaf: (departments[i // LEAVES_PER_DEPARTMENT] if departments else None)
        for i, leaf in enumerate(leaves)
    }
    queue_list = [
        q.Queue(
            leaf,
            parent_of[leaf],
            gpu=q.ResourceQuota(leaf_quota, 1 + i % 3),
            created=f"2026-01-01T00:{i % 60:02d}:00Z",
        )
        for i, leaf in enumerate(leaves)
    ]
    for dept in departments:
        kids = sum(1 for leaf in leaves if parent_of[leaf] == dept)
        queue_list.append(q.Queue(dept, None, gpu=q.ResourceQuota(leaf_quota * kids, 1)))
    pending = []
    demand_gpus = dict.fromkeys(leaves, 0)
    for i in range(groups):
        leaf = leaves[(i * 7919) % queues]  # a fixed scatter, uneven over queues
        gpus = 8 * (1, 1, 2, 4)[i % 4]
        requests = resources(milli_cpu=gpus * 8000, memory=gpus * 64 * gib, gpus=gpus)
        created = (
            f"2026-02-{1 + (i // 86400) % 28:02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z"
        )
        pending.append(
            q.PendingGroup(f"ns-{i % 50}/group-{i:06d}", leaf, requests, priority=i % 3, created=created)
        )
        demand_gpus[leaf] += gpus
    allocated = {
        leaf: resources(milli_cpu=0, memory=0, gpus=leaf_quota * (i % 3) // 2)
        for i, leaf in enumerate(leaves)
    }
    demand = {
        leaf: resources(milli_cpu=0, memory=0, gpus=demand_gpus[leaf] + allocated[leaf].gpus)
        for leaf in leaves
    }
    return {
        "queues": queue_list,
        "capacity": capacity,
        "pending": pending,
        "allocated": allocated,
        "demand": demand,
    }


def worker(queues: int, groups: int) -> None:
    """Time each step once and print ``{"step": name, "seconds": s}`` lines as they finish."""
    q: Any = importlib.import_module("scheduling.queues")
    inputs = _inputs(queues, groups)

    def step(name: str, call: Callable[[], Any]) -> Any:
        print(orjson.dumps({"step": name, "started": True}).decode(), flush=True)
        start = time.perf_counter()
        value = call()
        print(orjson.dumps({"step": name, "seconds": time.perf_counter() - start}).decode(), flush=True)
        return value

    tree = step("tree", lambda: q.QueueTree.build(inputs["queues"]))
    shares = step("fair_shares", lambda: q.fair_shares(tree, inputs["capacity"], inputs["demand"]))
    states = step("queue_states", lambda: q.queue_states(tree, shares, inputs["allocated"]))
    order = step("order_pending", lambda: q.order_pending(inputs["pending"], states, inputs["capacity"]))
    if len(order) != groups:
        msg = f"order_pending returned {len(order)} of {groups} groups"
        raise RuntimeError(msg)


def run_case(queues: int, groups: int, limit: float) -> dict[str, Any]:
    """Run one case in a subprocess, killing it after ``limit`` seconds; return its step times."""
    argv = [sys.executable, "-m", "perf.fairshare", "--queues", str(queues), "--groups", str(groups)]
    row: dict[str, Any] = {"queues": queues, "groups": groups, "steps": {}}
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), text=True
    ) as proc:
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            row["timed_out_after_seconds"] = limit
        current = None
        for line in out.splitlines():
            event = orjson.loads(line)
            if "seconds" in event:
                row["steps"][event["step"]] = round(event["seconds"], 4)
                current = None
            else:
                current = event["step"]
        if current is not None:
            row["unfinished_step"] = current
        if proc.returncode not in (0, -9) and "timed_out_after_seconds" not in row:
            row["error"] = err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"
    finished = row["steps"]
    if "fair_shares" in finished and "queue_states" in finished:
        row["recompute_seconds"] = round(
            sum(finished.get(s, 0.0) for s in ("fair_shares", "queue_states", "order_pending")), 4
        )
    return row


def measure_fair_share(
    queue_counts: Sequence[int], group_counts: Sequence[int], limit: float, progress: Progress
) -> dict[str, Any]:
    """Run the grid of cases, smaller first; skip a larger case once a smaller one ran out of time."""
    reason = availability()
    if reason:
        progress(f"fair share: not available ({reason})")
        return {"available": False, "reason": reason, "rows": []}
    rows: list[dict[str, Any]] = []
    for queues in queue_counts:
        exceeded = False
        for groups in group_counts:
            if exceeded:
                rows.append(
                    {"queues": queues, "groups": groups, "skipped": f"a smaller case took over {limit:g} s"}
                )
                continue
            progress(f"fair share: {queues} queues, {groups} pending groups (limit {limit:g} s)")
            row = run_case(queues, groups, limit)
            rows.append(row)
            exceeded = "timed_out_after_seconds" in row
            progress(f"  {row.get('steps')} {row.get('unfinished_step', '')} {row.get('error', '')}".rstrip())
    return {"available": True, "rows": rows, "limit_seconds": limit}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the worker subprocess."""
    parser = argparse.ArgumentParser(description="time scheduling.queues on one generated case")
    parser.add_argument("--queues", type=int, required=True)
    parser.add_argument("--groups", type=int, required=True)
    args = parser.parse_args(argv)
    worker(args.queues, args.groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
