"""The interleaved section's ratios, its goals and the floors' scheduler configuration (offline parts)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from perf.floor import floor_config
from perf.goals26 import issue26, render_interleaved
from perf.interleave import ratios_of


def test_each_run_is_divided_by_the_baseline_runs_around_it() -> None:
    runs: dict[str, list[float | None]] = {
        "baseline": [100.0, 60.0, None, 80.0],
        "phalanx": [80.0, 70.0, 40.0],
        "null-go": [None, 60.0, 72.0],
    }
    ratios = ratios_of(runs, "baseline")
    assert ratios["phalanx"]["each"] == [1.0, 1.167, 0.5]  # 80/80, 70/60 (one baseline), 40/80
    assert (ratios["phalanx"]["median"], ratios["phalanx"]["low"], ratios["phalanx"]["high"]) == (
        1.0,
        0.5,
        1.167,
    )
    assert ratios["null-go"]["each"] == [1.0, 0.9]
    assert "baseline" not in ratios


def test_no_ratio_without_any_baseline_rate() -> None:
    assert ratios_of({"baseline": [None, None], "phalanx": [50.0]}, "baseline") == {}


def _results(nodes: int, **medians: float) -> dict[str, Any]:
    ratios = {n: {"each": [m], "median": m, "low": m, "high": m} for n, m in medians.items()}
    runs = {"baseline": [100.0, 100.0], **{n: [m * 100] for n, m in medians.items()}}
    section = {"pods": 500, "repeats": 1, "runs": runs, "ratios": ratios, "baseline_spread": None}
    return {"sizes": [{"nodes": nodes, "interleaved": section}]}


FLOOR_1000 = "extender mode >= the null extender (null-front) in the same run, 1,000"


def _goal(results: dict[str, Any], start: str) -> tuple[str, str]:
    goal = next(g for g in issue26(results) if g.label.startswith(start))
    return goal.measured, goal.verdict


def test_throughput_is_judged_in_the_best_mode_with_the_floors_beside_it() -> None:
    met = _results(1000, **{"phalanx": 0.92, "phalanx-ranked": 0.7, "null-go": 0.82})
    measured, verdict = _goal(met, "throughput >= 0.9x baseline in the best mode, 1,000")
    assert verdict == "met"
    assert "phalanx 0.92x" in measured and "floors: null-go 0.82x" in measured
    missed = _results(1000, **{"phalanx": 0.85, "phalanx-ranked": 0.88})
    assert _goal(missed, "throughput >= 0.9x baseline in the best mode, 1,000")[1] == "MISSED"
    assert _goal(missed, "throughput >= 1x baseline in the best mode, 5,000")[1] == "n/a"


def test_the_extender_mode_is_judged_against_the_null_extender_of_its_stack() -> None:
    assert _goal(_results(1000, phalanx=0.8, **{"null-front": 0.79}), FLOOR_1000)[1] == "met"
    assert _goal(_results(1000, phalanx=0.7, **{"null-front": 0.79}), FLOOR_1000)[1] == "MISSED"


def test_the_table_lists_every_run_and_ratio() -> None:
    lines = render_interleaved(_results(1000, phalanx=0.9))
    assert any(line.strip().startswith("phalanx") and "0.90" in line for line in lines)


def test_a_floor_scheduler_is_the_shipped_one_with_a_null_extender() -> None:
    config = yaml.safe_load(floor_config("null-go", "http://127.0.0.1:1234", "/tmp/kubeconfig"))
    assert config["clientConnection"]["kubeconfig"] == "/tmp/kubeconfig"
    assert config["leaderElection"]["leaderElect"] is False
    assert config["percentageOfNodesToScore"] == 100
    (profile,) = config["profiles"]
    assert profile["schedulerName"] == "null-go"
    assert profile["pluginConfig"][0]["args"]["scoringStrategy"]["type"] == "MostAllocated"
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == "http://127.0.0.1:1234"
    assert (extender["filterVerb"], extender["prioritizeVerb"], extender["weight"]) == (
        "filter",
        "prioritize",
        5,
    )
    assert "bindVerb" not in extender and "preemptVerb" not in extender


def _gangs(*rows: dict[str, Any]) -> dict[str, Any]:
    return {"sizes": [{"nodes": 5000, "gangs": list(rows)}]}


def _row(seconds: float | None, **kind: Any) -> dict[str, Any]:
    return {"nodes": 5000, "size": 256, "bound": 256, "last_created_to_all_bound_seconds": seconds, **kind}


def test_the_gang_is_judged_against_kube_schedulers_native_gang_scheduling() -> None:
    native = "256-pod gang faster than kube-scheduler's native"
    rows = [_row(6.0), _row(5.0, baseline_single_pods=True), _row(9.0, native_gang=True)]
    assert _goal(_gangs(*rows), native) == ("phalanx 6.00 s, native 9.00 s", "met")
    rows[-1] = _row(4.0, native_gang=True)
    assert _goal(_gangs(*rows), native) == ("phalanx 6.00 s, native 4.00 s", "MISSED")
    failed = _row(None, native_gang=True, error="PodGroup not created: 404")
    assert _goal(_gangs(rows[0], failed), native) == ("native: PodGroup not created: 404", "n/a")
    # the native row is no phalanx gang for the ratio to the baseline's single pods
    assert _goal(_gangs(*rows), "256-pod gang <= 1.2x")[0] == "gang 6.00 s, baseline 5.00 s: 1.20x"


def test_the_decision_goal_reads_the_decisive_p99_at_the_full_size_only() -> None:
    label = "filter decision in-process p99"
    ranked = {"p50_ms": 1.1, "p99_ms": 2.5, "prioritize": {"p50_ms": 1.3, "p99_ms": 3.0}}
    full = {"nodes": 5000, "pods": 150_000, "decisive": {"p50_ms": 0.1, "p99_ms": 0.25}, "ranked": ranked}
    measured, verdict = _goal({"decision": full}, label)
    assert verdict == "met"
    assert "decisive p50 0.10 / p99 0.25 ms" in measured and "prioritize 1.30 / 3.00 ms" in measured
    assert _goal({"decision": {**full, "decisive": {"p50_ms": 0.1, "p99_ms": 0.8}}}, label)[1] == "MISSED"
    assert _goal({"decision": {**full, "pods": 30_000}}, label)[1] == "n/a"
    assert _goal({"decision": {"error": "killed"}}, label) == ("killed", "n/a")


def test_rounds_run_the_baseline_first_close_with_one_and_leave_phalanx_scheduling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import perf.interleave as interleave

    ran: list[str] = []

    class Bed:
        resumed = 0

        def resume_phalanx(self) -> None:
            self.resumed += 1

    def backlog(
        bb: Any, runner: Any, nodes: int, count: int, tag: str, progress: Any, disturbed: list[str]
    ) -> tuple[float, float]:
        ran.append(f"{runner.name}:{tag}")
        return (100.0, 50.0) if runner.name == "baseline" else (80.0, 60.0)

    monkeypatch.setattr(interleave, "one_backlog", backlog)
    monkeypatch.setattr(interleave, "wait_for_quiet_machine", lambda progress, what: 0.0)
    monkeypatch.setattr(interleave, "e2e_runs", lambda: [])
    bed = Bed()
    runners = [
        interleave.Runner(n, n, lambda: None, lambda: None) for n in ("baseline", "phalanx", "null-go")
    ]
    out = interleave.interleaved(bed, runners, 1000, 50, 2, lambda line: None)  # type: ignore[arg-type]
    assert ran == [
        "baseline:r1",
        "phalanx:r1",
        "null-go:r1",
        "baseline:r2",
        "phalanx:r2",
        "null-go:r2",
        "baseline:closing",
    ]
    assert bed.resumed == 1
    assert out["ratios"]["phalanx"]["each"] == [0.8, 0.8]
    assert out["whole_ratios"]["phalanx"]["each"] == [1.2, 1.2]
