"""The simulator section's event count and its figure, on hand-built results."""

from __future__ import annotations

import pytest
from perf import simreplay
from perf.common import Progress
from perf.figures import figures
from perf.simreplay import events

from simulator.results import JobResult, RunResult, StepRecord


def test_events_count_arrivals_completions_decisions_and_every_allocation_change() -> None:
    # a: first start, 2 restarts, 1 preemption = 4 changes; b: first start only = 1.
    jobs = (
        JobResult("a", "rigid", 0, 500, 2, preemptions=1),
        JobResult("b", "rigid", 60, 200, 0),
    )
    timeline = tuple(StepRecord(60 * i, 0, 0, {}, {}) for i in range(1, 8))
    result = RunResult(
        mode="philly", policy="fifo", seed=0, jobs=jobs, steps=9, capacity=8, timeline=timeline
    )
    assert events(result, arrivals=3) == {
        "arrivals": 3,
        "completions": 2,
        "decisions": 7,
        "allocation_changes": 5,
    }


def test_events_per_second_is_a_compared_figure_and_a_failed_policy_none() -> None:
    rows = [
        {"policy": "phalanx", "jobs": 73, "events_per_s": 1234.5},
        {"policy": "fifo", "error": "did not finish in 300 s"},
    ]
    found = {f.label: f.value for f in figures({"simulator": rows})}
    assert found == {"Philly window, phalanx, 73 jobs": 1234.5}


TINY = {"start": "2017-12-05 08:00:00", "hours": 0.25, "drain_hours": 0.25, "scale": 0.1}


def test_each_window_and_policy_is_one_row_of_a_real_replay_labelled_with_its_window(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(simreplay, "WINDOWS", {"tiny": TINY})
    monkeypatch.setattr(simreplay, "POLICIES", ("fifo",))
    rows = simreplay.measure_simulator([("tiny", 120.0)], Progress())
    assert [(r["window"], r["policy"]) for r in rows] == [("tiny", "fifo")]
    row = rows[0]
    assert row["jobs"] > 0
    assert (
        row["events"] == row["arrivals"] + row["completions"] + row["decisions"] + row["allocation_changes"]
    )
    said = capsys.readouterr().err
    assert said.endswith(
        f"] simulator tiny fifo: {row['jobs']:,} jobs on {row['nodes']:,} nodes, {row['events']:,} events "
        f"in {row['seconds']:.1f} s ({row['events_per_s']:,.0f}/s)\n"
    )


def test_a_replay_past_its_limit_is_a_row_that_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simreplay, "WINDOWS", {"tiny": TINY})
    monkeypatch.setattr(simreplay, "POLICIES", ("phalanx",))
    rows = simreplay.measure_simulator([("tiny", 0.01)], Progress(quiet=True))
    assert rows == [{"window": "tiny", "policy": "phalanx", "error": "did not finish in 0 s"}]
