from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.gang.staleness import check_stale, within
from scheduling.model import Pod
from tests.builders import a_gang, a_pod

SHORT = replace(a_gang("g", 2), phase="Running")


def on(name: str, phase: str = "Running") -> Pod:
    return a_pod(name).gpus(1).group("g").on("n1", [0]).phase(phase).build()


ONE_LEFT = [on("w0")]
WHOLE = [on("w0"), on("w1")]


@pytest.mark.parametrize(
    ("members", "since", "now", "excused", "kept", "evicted"),
    [
        (WHOLE, 1.0, 20.0, False, None, False),
        (ONE_LEFT, None, 20.0, False, 20.0, False),
        (ONE_LEFT, 15.0, 20.0, False, 15.0, False),
        (ONE_LEFT, 10.0, 20.0, False, None, True),
        (ONE_LEFT, 1.0, 20.0, True, None, False),
    ],
    ids=[
        "whole: its clock is dropped",
        "short now: its clock starts",
        "short within the grace period: its clock is kept",
        "short for the grace period: evicted",
        "members being re-created: excused, its clock starts again after",
    ],
)
def test_a_short_gang_is_evicted_after_the_grace_period_unless_excused(
    members: list[Pod], since: float | None, now: float, excused: bool, kept: float | None, evicted: bool
) -> None:
    check = check_stale(SHORT, members, None, short_since=since, now=now, grace=10.0, excused=excused)
    assert check.short_since == kept
    assert (check.evict is not None) == evicted
    if evicted:
        assert check.evict is not None
        assert [p.name for p in check.evict.holding] == ["w0"]


def test_a_time_counts_within_the_grace_period_either_side_of_the_clock() -> None:
    times = {"past": 91.0, "old": 89.0, "ahead": 109.0, "far-ahead": 3700.0, "never": None}
    assert within(times, now=100.0, grace=10.0) == {"past", "ahead"}
