"""Throughput ratios that hold on a noisy machine: every scheduler's backlog between two baseline backlogs.

Back-to-back baseline runs of the same 1,000 pods moved between 56 and 125 pods/s on this kind of
machine, so one phalanx run against one baseline run says little. Here each repeat runs the baseline
first, then every other scheduler (phalanx as shipped, phalanx with the ranked filter, the floors of
``perf.floor``), and one more baseline closes the last repeat; every run is divided by the mean of the
two baseline runs around it. The section reports, per scheduler, every ratio, their median and their
spread (lowest and highest), and the goals read the medians.

Each backlog is timed twice: from its first bind to its last (the scheduler's own rate), and over its
whole life, the seconds its creation took plus those from the scheduler's start to the last bind. A
scheduler that decides as pods are created (phalanx's admission door plans each pod in its webhook)
moves work out of the first window into the creation; the whole figure counts it, and the goals read
that one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from perf.bed import BASELINE_PROFILE, BenchBed
from perf.common import SIDECAR, Progress, e2e_runs, wait_for_idle_cpu, wait_for_quiet_machine
from perf.floor import Floors
from perf.throughput import create_all, gpu_pods
from perf.watch import BindWatch


@dataclass(frozen=True, slots=True)
class Runner:
    """One scheduler as the interleaved section drives it.

    Attributes:
        name: its label in the report (``baseline``, ``phalanx``, ``null-go``, ...).
        scheduler: the ``schedulerName`` its pods carry.
        pause: makes it stop scheduling, so a backlog can be created.
        start: makes it schedule.
    """

    name: str
    scheduler: str
    pause: Callable[[], None]
    start: Callable[[], None]


def one_backlog(
    bb: BenchBed,
    runner: Runner,
    nodes: int,
    count: int,
    tag: str,
    progress: Progress,
    disturbed: list[str],
) -> tuple[float | None, float | None]:
    """Create ``count`` pods while ``runner`` is paused, start it; return pods/s first bind to last, whole.

    The whole rate divides the pods bound by the creation's seconds plus those from the start to the
    last bind (the module docstring). A backlog started on a machine that never settled is noted in
    ``disturbed``.
    """
    namespace = bb.namespace(f"perf-il-{runner.name}-{nodes}-{tag}")
    runner.pause()
    pods = gpu_pods(runner.scheduler, "i", count)
    creation = create_all(bb, namespace, pods, progress)
    if wait_for_idle_cpu(progress, what=f"the {runner.name} backlog").busy:
        disturbed.append(f"{tag}, {runner.name}: the machine was still busy when the backlog started")
    with BindWatch(bb.http, namespace) as watch:
        started = time.monotonic()
        runner.start()
        names = {n for n, _ in pods}
        watch.wait_bound(names, timeout=max(300.0, len(pods) / 2))
        times = sorted(watch.bound_at[n] for n in names if n in watch.bound_at)
    runner.pause()
    bb.delete_pods(namespace)
    if len(times) < 2 or times[-1] <= times[0]:
        progress(f"  {runner.name} {tag}: {len(times)}/{len(pods)} bound, no rate")
        return None, None
    rate = (len(times) - 1) / (times[-1] - times[0])
    whole = len(times) / (creation + times[-1] - started)
    progress(
        f"  {runner.name} {tag}: {len(times)}/{len(pods)} bound, {rate:.1f} pods/s;"
        f" created in {creation:.1f} s, {whole:.1f} pods/s with it"
    )
    return rate, whole


def interleaved(
    bb: BenchBed, runners: list[Runner], nodes: int, count: int, repeats: int, progress: Progress
) -> dict[str, Any]:
    """Run ``repeats`` rounds of baseline then every runner, and a closing baseline; return the ratios.

    ``runners[0]`` must be the baseline. Every runner is left paused but phalanx, which is left
    scheduling with the extender as shipped, as the other sections expect it. Returns ``{"pods":
    count, "repeats": n, "runs": {name: [pods/s, ...]}, "ratios": {name: {"each": [...], "median",
    "low", "high"}}, "whole": ..., "whole_ratios": ... (the same, creation included), "disturbed": [...]}``.
    """
    baseline, others = runners[0], runners[1:]
    runs: dict[str, list[float | None]] = {r.name: [] for r in runners}
    whole: dict[str, list[float | None]] = {r.name: [] for r in runners}
    disturbed: list[str] = []
    started = time.monotonic()
    for i in range(repeats):
        wait_for_quiet_machine(progress, what=f"interleaved round {i + 1}/{repeats} at {nodes} nodes")
        progress(f"== interleaved round {i + 1}/{repeats} at {nodes} nodes, {count} pods a backlog")
        for runner in (baseline, *others):
            rate, with_creation = one_backlog(bb, runner, nodes, count, f"r{i + 1}", progress, disturbed)
            runs[runner.name].append(rate)
            whole[runner.name].append(with_creation)
            if e2e_runs():
                disturbed.append(f"round {i + 1}, {runner.name}: an end-to-end test run was running")
    rate, with_creation = one_backlog(bb, baseline, nodes, count, "closing", progress, disturbed)
    runs[baseline.name].append(rate)
    whole[baseline.name].append(with_creation)
    bb.resume_phalanx()  # the sections after this one (budget, gangs) expect phalanx's scheduler running
    return {
        "pods": count,
        "repeats": repeats,
        "runs": {k: [None if v is None else round(v, 1) for v in vs] for k, vs in runs.items()},
        "ratios": ratios_of(runs, baseline.name),
        "whole": {k: [None if v is None else round(v, 1) for v in vs] for k, vs in whole.items()},
        "whole_ratios": ratios_of(whole, baseline.name),
        "baseline_spread": _spread(runs[baseline.name]),
        "seconds": round(time.monotonic() - started, 1),
        "disturbed": disturbed,
    }


def ratios_of(runs: dict[str, list[float | None]], baseline: str) -> dict[str, dict[str, Any]]:
    """Each scheduler's pods/s divided by the mean of the baseline runs just before and after it.

    ``runs[baseline]`` has one run more than the others (the closing one): run ``i`` of any scheduler
    lies between baseline runs ``i`` and ``i + 1``. A run without a rate, or with no baseline rate
    around it, gives no ratio. Returns ``{name: {"each", "median", "low", "high"}}``.

    >>> ratios_of({"baseline": [100.0, 50.0, 100.0], "x": [60.0, 75.0]}, "baseline")["x"]
    {'each': [0.8, 1.0], 'median': 0.9, 'low': 0.8, 'high': 1.0}
    """
    base = runs[baseline]
    out: dict[str, dict[str, Any]] = {}
    for name, rates in runs.items():
        if name == baseline:
            continue
        each = []
        for i, rate in enumerate(rates):
            around = [b for b in base[i : i + 2] if b]
            if rate and around:
                each.append(round(rate / statistics.fmean(around), 3))
        if each:
            out[name] = {
                "each": each,
                "median": round(statistics.median(each), 3),
                "low": min(each),
                "high": max(each),
            }
    return out


def _spread(rates: list[float | None]) -> dict[str, float] | None:
    got = [r for r in rates if r]
    if not got:
        return None
    return {"low": round(min(got), 1), "high": round(max(got), 1), "median": round(statistics.median(got), 1)}


def standard_runners(bb: BenchBed, floors: Floors, *, ranked: bool) -> list[Runner]:
    """The baseline, phalanx as shipped, ranked (``ranked``) and as the sidecar, and the running floors."""
    runners = [
        Runner("baseline", BASELINE_PROFILE, bb.stop_baseline, bb.start_baseline),
        Runner("phalanx", "phalanx", bb.pause_phalanx, bb.resume_phalanx),
    ]
    if ranked:

        def ranked_start() -> None:
            bb.set_extender_env({"PHALANX_DECISIVE": "false"})
            bb.resume_phalanx()

        def ranked_pause() -> None:
            bb.pause_phalanx()
            bb.set_extender_env({})

        runners.append(Runner("phalanx-ranked", "phalanx", ranked_pause, ranked_start))
    runners.append(Runner(SIDECAR, "phalanx", partial(bb.pause_phalanx, sidecar=True), bb.resume_sidecar))
    for name in sorted(floors.floors):
        runners.append(
            Runner(name, name, partial(floors.stop_scheduler, name), partial(floors.start_scheduler, name))
        )
    return runners
