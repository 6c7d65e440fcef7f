"""The simulator's fidelity: the Tiresias baseline reproduces the published Tiresias JCTs.

In the Pollux-compatible mode, the average JCT of each of workloads 1-4 at load 1.0 must be within 10 %
of the published one.

Until this holds no other figure of the simulator can be trusted. It holds exactly today: every job's
JCT equals the artifact's (its ``results-jobload/tiresias-1.0/summary.json``), so the averages agree to
the published file's 0.1 s rounding, which the second test checks as a tripwire for any drift.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.loop import POLLUX, run
from simulator.policies.tiresias import Tiresias
from simulator.report import PUBLISHED_FILE, read_published
from simulator.results import RunResult
from simulator.speed import PolluxSpeed
from simulator.traces import read_pollux_workload

WORKLOADS = ("workload-1", "workload-2", "workload-3", "workload-4")


@pytest.fixture(scope="module")
def results(shared_dir: Path) -> dict[str, RunResult]:
    speed = PolluxSpeed.load()
    folder = shared_dir / "traces/pollux_workloads"
    return {
        name: run(read_pollux_workload(folder / f"{name}.csv"), Tiresias(), speed, POLLUX)
        for name in WORKLOADS
    }


@pytest.fixture(scope="module")
def published(shared_dir: Path) -> dict[str, float]:
    table = read_published(shared_dir / "traces/pollux_workloads" / PUBLISHED_FILE)
    return {name: table["tiresias", 1.0, name] for name in WORKLOADS}


@pytest.mark.parametrize("workload", WORKLOADS)
def test_tiresias_average_jct_within_10_percent_of_published(
    results: dict[str, RunResult], published: dict[str, float], workload: str
) -> None:
    ours, theirs = results[workload].average_jct, published[workload]
    assert abs(ours / theirs - 1) <= 0.10, f"{workload}: {ours:.1f} s vs published {theirs:.1f} s"


@pytest.mark.parametrize("workload", WORKLOADS)
def test_tiresias_average_jct_matches_published_to_its_rounding(
    results: dict[str, RunResult], published: dict[str, float], workload: str
) -> None:
    assert results[workload].average_jct == pytest.approx(published[workload], abs=0.05)
    assert len(results[workload].jobs) == 160


def test_same_seed_same_output(shared_dir: Path, results: dict[str, RunResult]) -> None:
    jobs = read_pollux_workload(shared_dir / "traces/pollux_workloads/workload-1.csv")
    again = run(jobs, Tiresias(), PolluxSpeed.load(), POLLUX, seed=0)
    assert again == results["workload-1"]
