"""The simulator section's event count and its figure, on hand-built results."""

from __future__ import annotations

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
