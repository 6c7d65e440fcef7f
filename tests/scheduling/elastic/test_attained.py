"""Attained service: a record on the job, counted on with the workers running now."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from scheduling.elastic.attained import Attained, attained
from scheduling.model import Pod
from tests.builders import a_pod


def running(name: str, gpus: int, since: float) -> Pod:
    return replace(a_pod(name).gpus(gpus).on("n1").build(), phase="Running", started_at=since)


@dataclass(frozen=True)
class Case:
    name: str
    kept: Attained | None
    workers: tuple[Pod, ...]
    now: float
    expected: Attained


CASES = [
    Case(
        "never written: the workers running now", None, (running("w0", 2, 10.0),), 70.0, Attained(120.0, 70.0)
    ),
    Case(
        "written: workers started before the record count from it",
        Attained(500.0, 50.0),
        (running("w0", 2, 10.0), running("w1", 1, 60.0)),
        70.0,
        Attained(500.0 + 2 * 20 + 1 * 10, 70.0),
    ),
    Case(
        "terminating, not started or not on a node: not running",
        Attained(500.0, 50.0),
        (
            replace(running("w0", 2, 10.0), terminating=True),
            replace(running("w1", 2, 10.0), started_at=None),
            replace(running("w2", 2, 10.0), node_name=None),
            replace(running("w3", 2, 10.0), phase="Succeeded"),
        ),
        70.0,
        Attained(500.0, 70.0),
    ),
    Case(
        "a record dated after now (a clock set back) counts as of now: nothing twice",
        Attained(500.0, 90.0),
        (running("w0", 2, 10.0),),
        70.0,
        Attained(500.0, 70.0),
    ),
    Case(
        "a record dated far ahead (edited by hand) does not stop the counting",
        Attained(500.0, 1e12),
        (running("w0", 2, 10.0),),
        70.0,
        Attained(500.0, 70.0),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_attained_service(case: Case) -> None:
    assert attained(case.kept, case.workers, case.now) == case.expected


def test_counting_on_in_steps_adds_up_to_counting_once() -> None:
    workers = (running("w0", 2, 0.0), running("w1", 4, 30.0))
    stepped = None
    for now in (40.0, 55.0, 100.0):
        stepped = attained(stepped, workers, now)
    assert stepped == attained(None, workers, 100.0) == Attained(2 * 100 + 4 * 70, 100.0)


def test_a_record_dated_far_ahead_is_counted_on_from_the_next_round() -> None:
    worker = (running("w0", 2, 0.0),)
    first = attained(Attained(500.0, 1e12), worker, 100.0)
    assert attained(first, worker, 160.0) == Attained(500.0 + 2 * 60, 160.0)
