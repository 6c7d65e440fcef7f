"""Which pytest runs the harness waits for: those that include the end-to-end tests."""

from __future__ import annotations

import subprocess
import sys

import pytest
from perf.common import e2e_runs, runs_e2e
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
