"""Section `simulator`: a fixed Philly window replayed through the trace simulator, per policy.

The simulator must be fast enough to use (10,000 Philly jobs on 1,000 nodes in a few minutes), so
``hack/bench`` reports simulated events per second. Each policy runs in its own
subprocess (``python -m perf.simreplay --policy P ...``, one JSON line) with a time limit, so a slow
policy costs only its own row. Nothing here starts a cluster: the simulator imports ``scheduling/``
only and runs in-process in the worker.

Events are what the loop simulated: arrivals (jobs submitted in the window), completions, decisions
(steps at which the policy was asked) and allocation changes (starts, resizes, moves, preemptions) of
the completed jobs (a ``RunResult`` keeps no counts for the unfinished ones).
The wall time is the loop's alone (reading the trace and importing are left out).
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import orjson

from perf.common import REPO, Progress, subprocess_env

WINDOW = {"start": "2017-12-05 08:00:00", "hours": 2.0, "drain_hours": 2.0, "scale": 0.1}
"""A window that `python -m simulator busy` lists as busy at this scale (73 jobs, 5 VCs, 15 nodes)."""

LARGE = {"start": "2017-10-10 00:00:00", "hours": 108.6, "drain_hours": 12.0, "scale": 3.125}
"""The speed goal's size: the 10,000 jobs submitted from 2017-10-10 on 1,000 nodes (10 VCs, x 3.125)."""

WINDOWS = {"busy": WINDOW, "10k": LARGE}
"""The windows a plan may name, by the label its rows carry."""

POLICIES = ("phalanx", "fifo")
TRACES = REPO.parent / "shared" / "traces" / "philly"


def events(result: Any, arrivals: int) -> dict[str, int]:
    """The simulated events of one ``RunResult`` (see the module docstring)."""
    changes = sum(1 + job.restarts + job.preemptions for job in result.jobs)  # the first start too
    return {
        "arrivals": arrivals,
        "completions": len(result.jobs),
        "decisions": len(result.timeline),
        "allocation_changes": changes,
    }


def replay(policy: str, start: str, hours: float, drain_hours: float, scale: float) -> dict[str, Any]:
    """Run one policy over the window in this process; its events and the loop's wall seconds."""
    from simulator import philly
    from simulator.loop import Mode, run
    from simulator.policies import for_rigid_trace
    from simulator.traces import read_philly_jobs

    trace = read_philly_jobs(TRACES / "philly_jobs_pollux.csv")
    jobs = philly.window(trace, dt.datetime.fromisoformat(start), hours)
    made = philly.setup(
        jobs, philly.read_vc_nodes(TRACES / "philly_vc_nodes_helios.csv"), gpus_per_node=8, scale=scale
    )
    mode = Mode("philly", made.nodes, 8, step_seconds=60, restart_penalty_seconds=30)
    factory = for_rigid_trace(policy, made.queues)
    began = time.perf_counter()
    result = run(
        jobs, factory(), philly.RigidSpeed(8), mode, until=int((hours + drain_hours) * 3600), timeline=True
    )
    seconds = time.perf_counter() - began
    counted = events(result, len(jobs))
    total = sum(counted.values())
    return {
        "policy": policy,
        "jobs": len(jobs),
        "nodes": made.nodes,
        **counted,
        "events": total,
        "seconds": seconds,
        "events_per_s": total / seconds if seconds else None,
    }


def measure_simulator(windows: Sequence[tuple[str, float]], progress: Progress) -> list[dict[str, Any]]:
    """Each policy of ``POLICIES`` over each (window label, seconds allowed) in a subprocess of its own."""
    rows: list[dict[str, Any]] = []
    for label, limit in windows:
        for policy in POLICIES:
            row = _replay_in_subprocess(label, policy, limit)
            rows.append(row)
            if "error" in row:
                progress(f"simulator {label} {policy}: {row['error']}")
            else:
                progress(
                    f"simulator {label} {policy}: {row['jobs']:,} jobs on {row['nodes']:,} nodes, "
                    f"{row['events']:,} events in {row['seconds']:.1f} s ({row['events_per_s']:,.0f}/s)"
                )
    return rows


def _replay_in_subprocess(label: str, policy: str, limit: float) -> dict[str, Any]:
    args = [sys.executable, "-m", "perf.simreplay", "--policy", policy]
    args += [f"--{k.replace('_', '-')}={v}" for k, v in WINDOWS[label].items()]
    try:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=limit, env=subprocess_env(), cwd=REPO
        )
    except subprocess.TimeoutExpired:
        return {"window": label, "policy": policy, "error": f"did not finish in {limit:.0f} s"}
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"window": label, "policy": policy, "error": f"failed: {tail[0]}"}
    return {"window": label, **orjson.loads(done.stdout.strip().splitlines()[-1])}


def main(argv: Sequence[str] | None = None) -> int:
    """Worker: replay one policy and print its row as one JSON line."""
    parser = argparse.ArgumentParser(prog="perf.simreplay")
    parser.add_argument("--policy", required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--hours", type=float, required=True)
    parser.add_argument("--drain-hours", type=float, required=True)
    parser.add_argument("--scale", type=float, required=True)
    ns = parser.parse_args(argv)
    row = replay(ns.policy, ns.start, ns.hours, ns.drain_hours, ns.scale)
    sys.stdout.write(orjson.dumps(row).decode() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
