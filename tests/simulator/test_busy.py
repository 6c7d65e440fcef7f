"""Busy windows of the Philly log, on hand-built jobs."""

from __future__ import annotations

import datetime as dt

import pytest

from simulator.busy import BusyWindow, busy_windows, cluster_gpus, hourly_demand
from simulator.traces import PhillyJob

T0 = dt.datetime(2017, 10, 1, 0, 0, 0)


def _job(minutes: int, duration: int, gpus: int, vc: str) -> PhillyJob:
    return PhillyJob(T0 + dt.timedelta(minutes=minutes), duration, gpus, duration * gpus, vc)


def test_hourly_demand_splits_a_job_over_the_hours_it_spans() -> None:
    # 8 GPUs from 00:30 for 90 min: half of hour 0 (4 GPUs on average), all of hour 1 (8).
    assert hourly_demand([_job(30, 5400, 8, "a")], T0, 3) == pytest.approx([4.0, 8.0, 0.0])


def test_cluster_gpus_counts_the_window_vcs_rounded_as_philly_setup_does() -> None:
    # round(16 * 0.1) = 2, round(8 * 0.1) = 1, an unlisted VC 0: 3 nodes of 8 GPUs; "c" is not in it.
    vc = {"a": 16, "b": 8, "c": 64}
    assert cluster_gpus(["a", "b", "b", "x"], vc, gpus_per_node=8, scale=0.1) == 24


def test_a_window_counts_only_its_own_jobs_and_needs_enough_busy_hours_and_queues() -> None:
    vc = {"a": 10, "b": 10, "c": 10}  # 1 node each at 0.1: 24 GPUs for three VCs
    jobs = [_job(0, 3 * 3600, 16, vc) for vc in ("a", "b", "c")]  # 48 GPUs for hours 0-2
    found = busy_windows(jobs, vc, hours=2, scale=0.1, min_busy_hours=2, min_queues=3)
    # Only the window from 00:00 holds the jobs; both of its hours ask 48 GPUs of 24.
    assert found == [BusyWindow(T0, 2, 3, 3, 24, 2.0)]
    assert busy_windows(jobs, vc, hours=2, scale=0.1, min_queues=4) == []
    assert busy_windows(jobs, vc, hours=2, scale=0.1, min_busy_hours=3) == []
