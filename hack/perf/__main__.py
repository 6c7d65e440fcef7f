"""``python -m perf`` (run through ``hack/bench``): every measurement in one run.

Order: the cluster sections first, on one test bed grown size by size (100, then 1,000, then 5,000
simulated 8-GPU nodes): at each size the baseline scheduler's throughput and latency, the phalanx
scheduler's, the extender's per-call latency and RSS while the phalanx pods are bound, and the gangs.
Then, with the cluster stopped so nothing competes for the two cores, the in-process sections: fair
share, the ClusterCache memory at 5,000 nodes / 150,000 pods, and the profile. Before each large step the
harness waits while an end-to-end test run is in progress (``perf.common.runs_e2e``).

Everything it starts is stopped in a ``finally``, also on Ctrl-C or SIGTERM; the state directory (logs
of every component) is deleted after a clean run and kept, with its path printed, after a failure.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

from perf.common import SIDECAR, Progress, versions, wait_for_idle_cpu, wait_for_quiet_machine
from perf.report import pods_per_second


@dataclass(frozen=True, slots=True)
class Plan:
    """What one mode measures.

    Attributes:
        sizes: simulated node counts, in the order the cluster grows.
        burst_pods: backlog size per node count (throughput).
        paced_pods: pods of the latency phase.
        paced_rate: pods per second of the latency phase (below either scheduler's rate).
        calls: timed extender calls per verb and pod shape.
        gang_sizes: gangs placed at every node count.
        fair_queues: leaf queue counts of the fair-share grid.
        fair_groups: pending group counts of the fair-share grid.
        fair_limit: seconds one fair-share case may take.
        memory_nodes: nodes of the ClusterCache memory case.
        memory_pods: pods of the ClusterCache memory case.
        profile_nodes: candidate counts profiled.
        profile_calls: calls per profiled case.
        envelope_pods_per_node: bound pods created through the API at the largest size (0: none).
        envelope_calls: timed extender calls per verb and pod shape with those pods in the cache.
        elastic_cases: (elastic jobs, nodes) of the elastic planning rounds timed.
        simulator_windows: (``perf.simreplay.WINDOWS`` label, seconds each policy may take) replayed.
        interleave_pods: backlog size per node count of the interleaved section (``perf.interleave``).
        interleave_repeats: its rounds (each: the baseline, phalanx's modes, the floors).
    """

    sizes: tuple[int, ...]
    burst_pods: dict[int, int]
    paced_pods: int
    paced_rate: float
    calls: int
    gang_sizes: tuple[int, ...]
    fair_queues: tuple[int, ...]
    fair_groups: tuple[int, ...]
    fair_limit: float
    memory_nodes: int
    memory_pods: int
    profile_nodes: tuple[int, ...]
    profile_calls: int
    envelope_pods_per_node: int = 0
    envelope_calls: int = 0
    elastic_cases: tuple[tuple[int, int], ...] = ((100, 1000),)
    simulator_windows: tuple[tuple[str, float], ...] = (("busy", 300.0),)
    interleave_pods: dict[int, int] = field(default_factory=lambda: {100: 200, 1000: 500})
    interleave_repeats: int = 2
    notes: list[str] = field(default_factory=list)


QUICK = Plan(
    sizes=(100, 1000),
    burst_pods={100: 320, 1000: 1000},
    paced_pods=60,
    paced_rate=20.0,
    calls=200,
    gang_sizes=(4, 16, 64),
    fair_queues=(10, 100, 1000),
    fair_groups=(1000, 10000),
    fair_limit=30.0,
    memory_nodes=5000,
    memory_pods=150000,
    profile_nodes=(1000,),
    profile_calls=100,
    envelope_pods_per_node=10,
    envelope_calls=100,
)

FULL = Plan(
    sizes=(100, 1000, 5000),
    burst_pods={100: 320, 1000: 3000, 5000: 3000},
    paced_pods=200,
    paced_rate=20.0,
    calls=1000,
    gang_sizes=(4, 16, 64, 256),
    fair_queues=(10, 100, 1000),
    fair_groups=(1000, 10000, 50000),
    fair_limit=300.0,
    memory_nodes=5000,
    memory_pods=150000,
    profile_nodes=(1000, 5000),
    profile_calls=300,
    envelope_pods_per_node=30,
    envelope_calls=300,
    elastic_cases=((100, 1000), (1000, 5000)),
    simulator_windows=(("busy", 300.0), ("10k", 900.0)),
    interleave_pods={100: 320, 1000: 1000, 5000: 1000},
    interleave_repeats=3,
)

SECTIONS = (
    "throughput",
    "interleaved",
    "gangs",
    "envelope",
    "liveprofile",
    "budget",
    "fairshare",
    "memory",
    "profile",
    "elastic",
    "simulator",
    "decision",
    "door",
)
"""Every section; the first six need the cluster (``throughput`` includes the per-call latency;
``interleaved`` runs the baseline, phalanx's two modes and the floors in turns, ``perf.interleave``)."""

CLUSTER_SECTIONS = frozenset({"throughput", "interleaved", "gangs", "envelope", "liveprofile", "budget"})


def _terminate(signum: int, frame: FrameType | None) -> None:
    """Turn SIGTERM into an exception so every ``finally`` stops what it started."""
    raise SystemExit(128 + signum)


def _cluster_sections(
    plan: Plan,
    state: Path,
    results: dict[str, Any],
    progress: Progress,
    *,
    sections: set[str],
    schedulers: tuple[str, ...],
    runners: frozenset[str] = frozenset(),
    out_dir: Path,
) -> None:
    from perf.bed import BenchBed  # the cluster code imports the test bed; offline runs do not need it
    from perf.budget import measure_budget
    from perf.envelope import fill_and_measure
    from perf.extender_calls import measure_calls
    from perf.gangs import measure_gangs
    from perf.liveprofile import live_profile
    from perf.throughput import Workload, fitting, measure

    threads = max(320, max(plan.gang_sizes, default=0) + 64)
    bb = BenchBed(state, progress, extender_threads=threads)
    floors = None
    try:
        wait_for_quiet_machine(progress, what="starting the cluster")
        bb.start()
        if "interleaved" in sections:
            from perf.floor import Floors

            floors = Floors(bb, progress)
            floors.start()
            results["floors_skipped"] = floors.skipped
        for nodes in plan.sizes:
            wait_for_quiet_machine(progress, what=f"the {nodes}-node measurements")
            progress(f"== {nodes} nodes: registering simulated 8-GPU nodes")
            took = bb.grow_to(nodes)
            size: dict[str, Any] = {"nodes": nodes, "register_seconds": round(took, 1)}
            results["sizes"].append(size)
            if "liveprofile" in sections:
                wait_for_idle_cpu(progress, what="the live profile")
                size["live_profile"] = live_profile(bb, 10.0, out_dir, progress)
            work = Workload(
                fitting(plan.burst_pods.get(nodes, 1000), nodes),
                fitting(plan.paced_pods, nodes),
                plan.paced_rate,
            )
            if "throughput" in sections and "baseline" in schedulers:
                size["baseline"] = measure(bb, "baseline", nodes, work, progress)
                # phalanx's paced phase at the baseline's rate (capped by its capacity: perf.throughput)
                work = replace(work, paced_rate=size["baseline"].get("paced_rate", work.paced_rate))

            def while_bound(
                nodes: int = nodes, size: dict[str, Any] = size, work: Workload = work
            ) -> dict[str, Any]:
                settled = wait_for_idle_cpu(progress, what="calls")
                size["settle_seconds_before_calls"] = round(settled.seconds, 1)
                rss = bb.extender_rss_kib()
                size["extender_rss_kib"] = rss
                results["memory"]["gunicorn"].append(
                    {
                        "when": "while the backlog is bound",
                        "nodes": nodes,
                        "pods": work.burst_pods,
                        "rss_kib": rss.get("VmRSS", 0),
                        "peak_rss_kib": rss.get("VmHWM", 0),
                    }
                )
                progress(f"extender per-call latency over {nodes} candidates ({plan.calls} calls each)")
                size["calls"] = measure_calls(bb.extender_url, bb.node_names, plan.calls, progress)
                if settled.busy:
                    size["calls"].setdefault("disturbed", settled.busy_note("the calls"))
                return {"extender_rss_kib": rss}

            if "throughput" in sections and "phalanx" in schedulers:
                size["phalanx"] = measure(bb, "phalanx", nodes, work, progress, while_bound=while_bound)
            if "throughput" in sections and SIDECAR in schedulers:
                size[SIDECAR] = measure(bb, SIDECAR, nodes, work, progress)
                bb.resume_phalanx()  # the sections after this one expect phalanx as shipped
            if "interleaved" in sections and floors is not None:
                from perf.interleave import interleaved, standard_runners

                count = fitting(plan.interleave_pods.get(nodes, 500), nodes)
                chosen = [
                    r
                    for r in standard_runners(bb, floors, ranked=True)
                    if not runners or r.name == "baseline" or r.name in runners
                ]
                size["interleaved"] = interleaved(bb, chosen, nodes, count, plan.interleave_repeats, progress)
            if "budget" in sections:
                size["budget"] = {}
                for which in schedulers:
                    wait_for_idle_cpu(progress, what=f"the {which} budget")
                    hint = pods_per_second(size, which)
                    size["budget"][which] = measure_budget(
                        bb, which, nodes, out_dir, progress, rate_hint=hint, minimum=work.burst_pods
                    )
            if "gangs" in sections:
                size["gangs"] = measure_gangs(bb, nodes, plan.gang_sizes, progress)
            rss = bb.extender_rss_kib()
            results["memory"]["gunicorn"].append(
                {
                    "when": "after the size's sections, pods deleted",
                    "nodes": nodes,
                    "pods": 0,
                    "rss_kib": rss.get("VmRSS", 0),
                    "peak_rss_kib": rss.get("VmHWM", 0),
                }
            )
        if "envelope" in sections and plan.envelope_pods_per_node and plan.sizes:
            envelope = fill_and_measure(bb, plan.envelope_pods_per_node, plan.envelope_calls, progress)
            results["memory"]["envelope"] = envelope
            results["memory"]["gunicorn"].append(
                {
                    "when": "pods created through the API",
                    "nodes": envelope["nodes"],
                    "pods": envelope["pods"],
                    "rss_kib": envelope["rss_kib"],
                    "peak_rss_kib": envelope["peak_rss_kib"],
                }
            )
    finally:
        progress("stopping the cluster, the extender and the baseline scheduler")
        if floors is not None:
            floors.stop()
        bb.stop()


def _api_estimate(results: dict[str, Any], pods: int) -> str:
    rates = [
        s[w]["burst_created_per_second"]
        for s in results.get("sizes", [])
        for w in ("baseline", "phalanx")
        if s.get(w, {}).get("burst_created_per_second")
    ]
    if not rates:
        return ""
    rate = max(rates)
    return (
        f"{pods:,} pods through the API server: the harness created pods at up to {rate:.0f}/s here, "
        f"so about {pods / rate / 60:.0f} min of creation alone (plus the simulated kubelet's status "
        "writes); this run did not create them (full mode does), the ClusterCache subprocess stands in"
    )


def _offline_sections(
    plan: Plan, out_dir: Path, results: dict[str, Any], progress: Progress
) -> list[tuple[str, Callable[[], None]]]:
    """The sections that need no cluster, as (name, run) pairs; each stores its figures in ``results``."""

    def fair_share() -> None:
        from perf.fairshare import measure_fair_share

        results["fair_share"] = measure_fair_share(
            plan.fair_queues, plan.fair_groups, plan.fair_limit, progress
        )

    def memory() -> None:
        from perf.memory import measure_cache_memory

        envelope = results["memory"].get("envelope") or {}
        if envelope.get("pods", 0) < FULL.memory_pods:
            results["memory"]["api_estimate"] = _api_estimate(results, FULL.memory_pods)
        results["memory"]["cache"] = measure_cache_memory(plan.memory_nodes, plan.memory_pods, progress)

    def profile() -> None:
        from perf.profiling import profile_verbs

        results["profile"] = profile_verbs(plan.profile_nodes, plan.profile_calls, out_dir, progress)

    def elastic() -> None:
        from perf.elastic import measure_elastic

        results["elastic"] = measure_elastic(plan.elastic_cases, progress)

    def decision() -> None:
        from perf.decision import measure_decision

        settled = wait_for_idle_cpu(progress, what="the decision")
        results["decision"] = measure_decision(
            plan.memory_nodes, plan.memory_pods, plan.profile_calls, progress
        )
        if settled.busy:
            results["decision"]["disturbed"] = settled.busy_note("the decision")

    def door() -> None:
        from perf.door import measure_door

        settled = wait_for_idle_cpu(progress, what="the door")
        results["door"] = measure_door(1000, plan.profile_calls, progress)
        if settled.busy:
            results["door"]["disturbed"] = settled.busy_note("the door")

    def simulator() -> None:
        from perf.simreplay import measure_simulator

        results["simulator"] = measure_simulator(plan.simulator_windows, progress)

    return [
        ("fairshare", fair_share),
        ("memory", memory),
        ("profile", profile),
        ("elastic", elastic),
        ("simulator", simulator),
        ("decision", decision),
        ("door", door),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; print progress on stderr and the table on stdout; write the JSON."""
    parser = argparse.ArgumentParser(prog="hack/bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="100 and 1,000 nodes, fewer pods, gangs up to 64"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="where to write the results (default: printed)"
    )
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}"
    )
    parser.add_argument("--sizes", default="", help="override the node counts, e.g. 100,1000")
    parser.add_argument(
        "--schedulers",
        default="baseline,phalanx,phalanx-sidecar",
        help="throughput and budget through these (baseline, phalanx, phalanx-sidecar); the sidecar is "
        "in by default because issue 26's paced goal is judged in the best mode",
    )
    parser.add_argument(
        "--runners",
        default="",
        help="the interleaved section's runners besides the baseline (default: all: phalanx, "
        "phalanx-ranked, phalanx-sidecar, null-flask, null-front, null-go)",
    )
    parser.add_argument("--state-dir", type=Path, default=None, help="cluster state (default: a temp dir)")
    parser.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("OLD.json", "NEW.json"),
        help="print two runs' JSON side by side with issue 13's goals, and exit (starts nothing)",
    )
    args = parser.parse_args(argv)
    if args.compare:
        from perf.compare import NotABenchFileError, render_comparison

        try:
            print(render_comparison(*args.compare))
        except NotABenchFileError as exc:
            parser.error(str(exc))
        return 0
    plan = QUICK if args.quick else FULL
    sizes = tuple(int(s) for s in args.sizes.split(",") if s.strip()) or plan.sizes
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    unknown = sections - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    json_path = args.json or Path.home() / ".local/state/phalanx/bench" / f"bench-{stamp}.json"
    signal.signal(signal.SIGTERM, _terminate)
    progress = Progress()
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "versions": versions(),
        "sizes": [],
        "memory": {"gunicorn": []},
        "notes": [],
    }
    progress(f"benchmark ({results['mode']}): {results['versions']}")
    state = args.state_dir or Path(tempfile.mkdtemp(prefix="phalanx-bench-"))
    failed = False
    try:
        if sections & CLUSTER_SECTIONS:
            plan_sized = dataclasses.replace(plan, sizes=sizes)
            try:
                schedulers = tuple(s.strip() for s in args.schedulers.split(",") if s.strip())
                _cluster_sections(
                    plan_sized,
                    state,
                    results,
                    progress,
                    sections=sections,
                    schedulers=schedulers,
                    runners=frozenset(r.strip() for r in args.runners.split(",") if r.strip()),
                    out_dir=json_path.parent,
                )
            except Exception as exc:  # report what was measured before the failure, then fail the run
                failed = True
                results["notes"].append(f"cluster sections failed: {type(exc).__name__}: {exc}")
                traceback.print_exc()
        for name, run in _offline_sections(plan, json_path.parent, results, progress):
            if name in sections:
                wait_for_quiet_machine(progress, what=f"the {name} section")
                try:
                    run()
                except Exception as exc:  # one failing section must not lose the figures of the others
                    failed = True
                    results["notes"].append(f"{name} section failed: {type(exc).__name__}: {exc}")
                    traceback.print_exc()
    except BaseException:
        failed = True
        raise
    finally:
        results["duration_seconds"] = round(time.monotonic() - progress.started, 1)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_bytes(orjson.dumps(results, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
        progress(f"results written to {json_path}")
        if failed:
            progress(f"logs of every component kept in {state}")
        elif args.state_dir is None:
            shutil.rmtree(state, ignore_errors=True)
    _write_plot(results, json_path.with_suffix(".png"), progress)
    from perf.goals import render_goals
    from perf.report import render

    print(render(results))
    from perf.goals26 import render_goals26, render_interleaved

    for line in render_interleaved(results):
        print(line)
    print(f"\n{render_goals(results)}")
    print(f"\n{render_goals26(results)}")
    _print_live_profiles(results)
    from perf.budget_report import render_budget

    for line in render_budget(results):
        print(line)
    from perf.door import render_door

    for line in render_door(results):
        print(line)
    _print_profile(results.get("profile"))
    return 1 if failed else 0


def _write_plot(results: dict[str, Any], path: Path, progress: Progress) -> None:
    """The scaling plot beside the JSON; a plot that fails loses no figure, so it only says why."""
    try:
        from perf.plot import write_plot

        if write_plot(results, path) is not None:
            progress(f"plot written to {path}")
    except Exception as exc:  # the JSON is written already; the plot is a view of it
        progress(f"no plot: {type(exc).__name__}: {exc}")


def _print_live_profiles(results: dict[str, Any]) -> None:
    for size in results.get("sizes", []):
        live = size.get("live_profile")
        if not live:
            continue
        print(
            f"\nLive profile of the gunicorn worker (py-spy, lines), {size['nodes']:,} candidates, 4-GPU pod"
        )
        if not live.get("available"):
            print(f"  not available: {live.get('reason')}")
            continue
        for verb in ("filter", "prioritize"):
            case = live.get(verb) or {}
            print(f"  {verb}: {case.get('calls')} calls, {case.get('samples')} samples in request threads")
            for row in case.get("self", [])[:10]:
                print(f"    self {row['share']:6.1%}  {row['frame']}")
            for row in case.get("product_inclusive", [])[:8]:
                print(f"    incl {row['share']:6.1%}  {row['frame']}")


def _print_profile(profile: dict[str, Any] | None) -> None:
    if not profile:
        return
    print("\nProfile (in-process, real Flask app and ClusterCache, 4-GPU pod, steady state)")
    if not profile.get("available"):
        print(f"  not available: {profile.get('reason')}")
        return
    for case in profile["cases"]:
        ms = case["in_process_ms"]
        print(
            f"  {case['verb']} @ {case['nodes']:,} candidates: p50 {ms['p50']:.2f} ms, "
            f"p99 {ms['p99']:.2f} ms; profile {case['profile']}"
        )
        for row in case["self"][:8]:
            print(f"    self {row['share']:6.1%}  {row['where']}  {row['function']}")
        for row in case["product_inclusive"][:6]:
            print(f"    incl {row['share']:6.1%}  {row['where']}  {row['function']}")


if __name__ == "__main__":
    sys.exit(main())
