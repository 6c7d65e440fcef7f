"""The same-run gang goal: the 256-pod gang against the baseline's 256 single pods of the same run."""

from __future__ import annotations

from typing import Any

from perf.goals import issue13
from perf.report import goals


def _run(*gangs: dict[str, Any]) -> dict[str, Any]:
    return {"sizes": [{"nodes": 5000, "gangs": list(gangs)}]}


def _gang_goal(results: dict[str, Any]) -> tuple[str, str]:
    goal = next(g for g in issue13(results) if g.label.startswith("256-pod gang"))
    return goal.measured, goal.verdict


def _row(seconds: float | None, *, baseline: bool = False, size: int = 256) -> dict[str, Any]:
    row: dict[str, Any] = {"nodes": 5000, "size": size, "bound": size}
    row["last_created_to_all_bound_seconds"] = seconds
    return row | ({"baseline_single_pods": True} if baseline else {})


def test_the_gang_is_judged_against_the_baseline_single_pods_of_the_same_size() -> None:
    assert _gang_goal(_run(_row(6.5), _row(5.0, baseline=True))) == (
        "gang 6.50 s, baseline 5.00 s: 1.30x",
        "met",
    )
    assert _gang_goal(_run(_row(9.0), _row(5.0, baseline=True))) == (
        "gang 9.00 s, baseline 5.00 s: 1.80x",
        "MISSED",
    )


def test_without_the_baseline_row_the_goal_has_no_verdict() -> None:
    assert _gang_goal(_run(_row(3.2), _row(2.0, baseline=True, size=64))) == (
        "gang 3.20 s; baseline for single pods not measured",
        "n/a",
    )


def test_a_gang_that_did_not_bind_whole_misses_whatever_the_baseline_did() -> None:
    row = _row(None) | {"bound": 200}
    assert _gang_goal(_run(row, _row(5.0, baseline=True))) == ("200/256 members bound", "MISSED")


def _calls(p50: float) -> dict[str, Any]:
    return {verb: {"1": {"p50": p50, "p99": p50 * 2}} for verb in ("filter", "prioritize")}


def _steady_goal(results: dict[str, Any]) -> tuple[str, str]:
    goal = next(g for g in issue13(results) if g.label.startswith("per-call p50"))
    return goal.measured, goal.verdict


def test_per_call_cost_at_the_envelope_is_judged_against_a_tenth_of_its_pods() -> None:
    def run(tenth: float, full: float, pods: int = 150_000) -> dict[str, Any]:
        first = {"pods": pods // 10, "calls": _calls(tenth)}
        return {"memory": {"envelope": {"pods": pods, "calls": _calls(full), "first_stage": first}}}

    assert _steady_goal(run(2.0, 2.3))[1] == "met"
    measured, verdict = _steady_goal(run(2.0, 2.5))
    assert verdict == "MISSED" and "filter 2.00 -> 2.50 ms (15,000 -> 150,000 pods)" in measured
    assert _steady_goal(run(2.0, 2.0, pods=10_000))[1] == "n/a"
    assert _steady_goal({"memory": {"envelope": {"pods": 150_000, "calls": _calls(2.0)}}}) == (
        "not measured",
        "n/a",
    )


def test_the_gang_time_goal_reads_phalanx_gang_not_the_native_one_after_it() -> None:
    native = _row(7.1) | {"native_gang": True}
    rows = {
        label: measured for label, measured, _ in goals(_run(_row(11.7), _row(8.6, baseline=True), native))
    }
    assert rows["256-pod gang bound <= 5 s after last member (5,000 nodes)"] == "11.70 s"
