"""Which node each waiting worker is pinned to: the one rule the pass and the webhook share."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.elastic.pinning import choose_pins, stale_pins
from scheduling.model import Pod
from tests.builders import a_pod


def worker(index: int, *, on: str | None = None, pinned: str | None = None, gone: bool = False) -> Pod:
    pod = a_pod(f"job-worker-{index}").gpus(2)
    if on:
        pod = pod.on(on)
    if pinned:
        pod = pod.pinned(pinned)
    if gone:
        pod = pod.terminating()
    return pod.build()


@pytest.mark.parametrize(
    ("target", "workers", "expected"),
    [
        pytest.param(
            {"n1": 3, "n2": 1},
            [worker(0, on="n1"), worker(1), worker(2), worker(3)],
            [("job-worker-1", "n1"), ("job-worker-2", "n1"), ("job-worker-3", "n2")],
            id="lowest-index-first-to-the-node-holding-most",
        ),
        pytest.param(
            {"n1": 1, "n2": 2},
            [worker(0, on="n2"), worker(1, pinned="n2"), worker(2)],
            [("job-worker-2", "n1")],
            id="running-and-pinned-take-their-places-first",
        ),
        pytest.param(
            {"n1": 2},
            [worker(0, on="n1"), worker(1, on="n1"), worker(2)],
            [],
            id="no-room-left-no-pin",
        ),
        pytest.param(
            {"n2": 1, "n1": 1},
            [worker(0), worker(1)],
            [("job-worker-0", "n1"), ("job-worker-1", "n2")],
            id="ties-by-node-name",
        ),
        pytest.param(
            {"n1": 2},
            [worker(0, on="n1"), worker(1, on="n3", gone=True), worker(2, gone=True)],
            [],
            id="terminating-workers-are-not-pinned",
        ),
    ],
)
def test_choose_pins(target: dict[str, int], workers: list[Pod], expected: list[tuple[str, str]]) -> None:
    assert [(pod.name, node) for pod, node in choose_pins(target, workers)] == expected


def test_a_finished_worker_holds_no_place() -> None:
    done = replace(worker(0, on="n1"), phase="Succeeded")
    assert [(p.name, n) for p, n in choose_pins({"n1": 1}, [done, worker(1)])] == [("job-worker-1", "n1")]


@pytest.mark.parametrize(
    ("target", "workers", "expected"),
    [
        pytest.param(
            {"n2": 2, "n3": 2},
            [worker(0, pinned="n1"), worker(1, pinned="n1"), worker(2, on="n2"), worker(3, on="n3")],
            [("job-worker-0", "n2"), ("job-worker-1", "n3")],
            id="pinned-by-an-older-plan-to-a-node-no-longer-in-it",
        ),
        pytest.param(
            {"n1": 1, "n2": 2},
            [worker(0, pinned="n1"), worker(1, pinned="n1"), worker(2, on="n2")],
            [("job-worker-1", "n2")],
            id="the-lowest-index-keeps-the-one-place-left",
        ),
        pytest.param(
            {"n1": 2},
            [worker(0, on="n1"), worker(1, on="n1"), worker(2, pinned="n3")],
            [],
            id="no-place-elsewhere-it-stays-rather-than-churn",
        ),
        pytest.param(
            {"n1": 2, "n2": 1},
            [worker(0, pinned="n1"), worker(1, pinned="n2"), worker(2)],
            [],
            id="pins-that-fit-are-not-stale",
        ),
        pytest.param(
            {"n2": 1},
            [worker(0), worker(1, pinned="n1")],
            [],
            id="a-lower-unpinned-index-takes-the-place-first",
        ),
    ],
)
def test_stale_pins(target: dict[str, int], workers: list[Pod], expected: list[tuple[str, str]]) -> None:
    assert [(pod.name, node) for pod, node in stale_pins(target, workers)] == expected
