"""Which pytest runs the harness waits for, and how a machine that never settled marks the figures."""

from __future__ import annotations

import subprocess
import sys

import pytest
from perf import common
from perf.common import e2e_runs, runs_e2e
from perf.report import disturbed
from workload import wait_for


@pytest.mark.parametrize(
    ("argv", "includes_e2e"),
    [
        (["pytest"], True),
        (["/work/main/.venv/bin/pytest", "-q"], True),
        (["python", "-m", "pytest", "-x", "tests"], True),
        (["pytest", "tests/e2e/test_queues.py", "-k", "reclaim"], True),
        (["pytest", "-m", "e2e"], True),
        (["pytest", "-m", "not e2e"], False),
        (["pytest", "-q", "-m", "not e2e", "tests/"], False),
        (["pytest", "tests/scheduling", "tests/extender"], False),
        (["pytest", "-k", "e2e_like_name", "tests/simulator"], False),
        (["python", "-m", "perf", "--json", "x.json"], False),
    ],
    ids=[
        "hack-test",
        "venv-pytest",
        "module-whole-tree",
        "an-e2e-file",
        "e2e-marker",
        "not-e2e-marker",
        "not-e2e-with-tree",
        "unit-paths",
        "k-value-is-not-a-path",
        "not-pytest",
    ],
)
def test_a_run_includes_the_e2e_tests_when_its_paths_or_marker_do(
    argv: list[str], includes_e2e: bool
) -> None:
    assert runs_e2e(argv) is includes_e2e


def test_a_running_process_that_looks_like_a_whole_suite_run_is_found() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "pytest"])
    try:
        # Polled: a process's command line reads empty for a moment while it execs.
        wait_for("the child seen as a suite run", lambda: child.pid in e2e_runs(), timeout=10)
    finally:
        child.kill()
        child.wait()
    assert child.pid not in e2e_runs()


@pytest.mark.parametrize(("idle_share", "busy"), [(0.1, True), (0.95, False)], ids=["busy", "idle"])
def test_a_machine_that_never_settles_marks_what_is_measured_next(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], idle_share: float, busy: bool
) -> None:
    """The bench measured anyway after its wait timed out; the figures must say so, not read as clean."""
    ticks = iter(range(0, 10**9, 100))

    def jiffies() -> tuple[int, int]:
        total = next(ticks)
        return int(total * idle_share), total

    monkeypatch.setattr(common, "_cpu_jiffies", jiffies)
    monkeypatch.setattr(common, "e2e_runs", lambda: [])
    settled = common.wait_for_idle_cpu(common.Progress(), what="the calls", window=0.001, timeout=0.05)
    assert settled.busy is busy
    assert bool(settled.busy_note("the calls")) is busy
    assert ("marked disturbed" in capsys.readouterr().err) is busy


def test_the_report_lists_every_disturbed_figure_with_its_reason() -> None:
    busy = "the machine was still busy when its calls started"
    results = {
        "sizes": [
            {
                "nodes": 5000,
                "gangs": [
                    {"size": 256, "disturbed": "the machine was still busy when the gang started"},
                    {"size": 64, "disturbed": True},  # a result file from before the reason was kept
                    {"size": 16, "disturbed": ""},
                ],
            }
        ],
        "memory": {"envelope": {"pods": 150000, "disturbed": busy, "first_stage": {"pods": 15000}}},
        "decision": {
            "decisive": {"p99_ms": 0.38},
            "disturbed": "the machine was still busy when the decision started",
        },
        "door": {"in_flight": {}},
    }
    assert disturbed(results) == [
        "gang of 256 @ 5,000: the machine was still busy when the gang started",
        "gang of 64 @ 5,000: an end-to-end test run was running",
        f"envelope @ 150,000 pods: {busy}",
        "decision (in-process): the machine was still busy when the decision started",
    ]
