"""Small helpers every section shares: progress lines, percentiles, versions, process facts, politeness.

Kept free of cluster code so the offline sections (fair share, memory) can import it in their own
subprocess without pulling in the test bed.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

SIDECAR = "phalanx-sidecar"
"""phalanx as the framework sidecar (``Testbed.use_sidecar``), measured beside ``phalanx`` as shipped."""

REPO = Path(__file__).resolve().parents[2]
"""Root of the checkout: every path the harness reads (manifests, topologies) is relative to it."""

HACK = REPO / "hack"
"""``hack/``: put on ``PYTHONPATH`` of the harness's own subprocesses so ``perf`` imports there too."""

_VALUED_OPTIONS = frozenset({"-m", "-k", "-p", "-n", "-c", "-o", "--rootdir", "--maxfail", "--junitxml"})
"""pytest options whose value is the next argument (not a test path)."""


@dataclass
class Progress:
    """Timestamped progress lines on stderr, so a long run shows where it is without cluttering stdout.

    Attributes:
        started: ``time.monotonic()`` when the run began; every line shows the seconds since then.
        quiet: drop the lines (tests of the harness itself, or ``--quiet``).
    """

    started: float = field(default_factory=time.monotonic)
    quiet: bool = False

    def __call__(self, message: str) -> None:
        """Print one progress line (also usable as the test bed's ``log`` callback)."""
        if not self.quiet:
            elapsed = time.monotonic() - self.started
            print(f"[bench {elapsed:7.1f}s] {message}", file=sys.stderr, flush=True)


def percentile(samples: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: an observed value, never an interpolation between two.

    >>> percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5), percentile([1.0, 2.0], 0.99)
    (3.0, 2.0)
    """
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    rank = max(1, -(-len(ordered) * q // 1))  # ceil(n * q), at least the first sample
    return ordered[min(len(ordered), int(rank)) - 1]


def summary(samples: Sequence[float]) -> dict[str, float]:
    """p50, p99, max and count of a list of samples, rounded for the JSON report.

    >>> summary([1.0, 2.0, 3.0])
    {'n': 3, 'p50': 2.0, 'p99': 3.0, 'max': 3.0}
    """
    if not samples:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    return {
        "n": len(samples),
        "p50": round(percentile(samples, 0.5), 4),
        "p99": round(percentile(samples, 0.99), 4),
        "max": round(max(samples), 4),
    }


def _git(*args: str) -> str:
    try:
        result = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def _package(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _mem_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def versions() -> dict[str, Any]:
    """What the figures depend on: versions, commit, cores and memory (a figure means little without them).

    The product code measured is the working tree, so uncommitted changes to it are listed too: a
    commit alone would not say what ran.
    """
    sys.path.insert(0, str(HACK))
    try:
        from localcluster import kubernetes_version  # stdlib only; lives in hack/
    finally:
        sys.path.remove(str(HACK))
    commit = _git("rev-parse", "HEAD")
    product = ("scheduling", "kubeio", "extender", "placement", "nodeagent", "manifests", "pyproject.toml")
    changes = _git("status", "--porcelain", "--", *product).splitlines()
    return {
        "python": platform.python_version(),
        "kubernetes": kubernetes_version(REPO / "hack" / "controlplane"),
        "git_commit": commit + ("+dirty" if changes else ""),
        "uncommitted_product_changes": changes,
        "cores": os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "machine": f"{platform.system()} {platform.machine()} {platform.processor() or ''}".strip(),
        "packages": {
            p: _package(p) for p in ("flask", "gunicorn", "orjson", "networkx", "prometheus-client")
        },
    }


def runs_e2e(argv: Sequence[str]) -> bool:
    """Whether the pytest run with this command line includes the end-to-end tests.

    ``hack/test`` runs plain ``pytest`` (every test, e2e included); ``pytest tests/scheduling`` or
    ``pytest -m "not e2e"`` do not.

    >>> runs_e2e(["python", "-m", "pytest"]), runs_e2e(["pytest", "tests/e2e/test_queues.py"])
    (True, True)
    >>> runs_e2e(["pytest", "-m", "not e2e"]), runs_e2e(["pytest", "-q", "tests/scheduling"])
    (False, False)
    """
    at = next((i for i, arg in enumerate(argv) if arg == "pytest" or arg.endswith("/pytest")), None)
    if at is None:
        return False
    paths: list[str] = []
    args = iter(argv[at + 1 :])
    for arg in args:
        if arg in _VALUED_OPTIONS:
            value = next(args, "")
            if arg == "-m" and "not e2e" in value:
                return False
        elif not arg.startswith("-"):
            paths.append(arg)
    return not paths or any("e2e" in path or path.rstrip("/") in {"tests", "."} for path in paths)


def e2e_runs() -> list[int]:
    """Pids of pytest runs on this machine that include the end-to-end tests, never this process."""
    mine = {os.getpid(), os.getppid()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if runs_e2e([arg for arg in argv if arg]):
            found.append(int(entry.name))
    return sorted(found)


def wait_for_quiet_machine(progress: Progress, *, what: str, poll_seconds: float = 30.0) -> float:
    """Wait while an end-to-end test run uses the machine; return the seconds waited.

    Two cores cannot hold a benchmark and a test run at once without each disturbing the other: the
    figures would be wrong and the tests' timeouts would be at risk. So every large measurement starts
    only when no pytest run that includes the end-to-end tests is running (``runs_e2e``).
    """
    waited = 0.0
    while pids := e2e_runs():
        progress(f"an end-to-end test run is in progress (pids {pids}); waiting before {what}")
        time.sleep(poll_seconds)
        waited += poll_seconds
    return waited


def _cpu_jiffies() -> tuple[int, int]:
    """(idle, total) jiffies of all CPUs since boot, from the first line of ``/proc/stat``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)


@dataclass(frozen=True, slots=True)
class Settled:
    """How a wait for an idle machine ended."""

    seconds: float
    """Seconds waited."""
    busy: bool
    """The machine was still busy at the timeout: what is measured next shares the cores with whatever
    kept them busy, so its figures are marked disturbed (``busy_note``) rather than read as clean."""

    def busy_note(self, what: str) -> str:
        """The disturbed-figure note for ``what`` measured after this wait (``""`` when it settled)."""
        return f"the machine was still busy when {what} started" if self.busy else ""


def wait_for_idle_cpu(
    progress: Progress, *, what: str, idle: float = 0.8, window: float = 1.0, timeout: float = 180.0
) -> Settled:
    """Wait until the machine is at least ``idle`` idle over ``window`` seconds, or ``timeout`` seconds.

    After a burst of binds the simulated kubelet is still reporting pods Running and every watcher
    (extender, schedulers, placement manager) is still digesting those events; per-call timings taken
    then measure that backlog on two cores, not the extender. So those measurements start once the
    machine has settled, or after ``timeout`` with a note in the progress output. An end-to-end test run
    that started meanwhile is waited for first (``wait_for_quiet_machine``).
    """
    waited = wait_for_quiet_machine(progress, what=what)
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        idle0, total0 = _cpu_jiffies()
        time.sleep(window)
        idle1, total1 = _cpu_jiffies()
        if total1 > total0 and (idle1 - idle0) / (total1 - total0) >= idle:
            return Settled(waited + time.monotonic() - started, busy=False)
    progress(f"machine still busy after {timeout:.0f}s; measuring {what} anyway (marked disturbed)")
    return Settled(waited + time.monotonic() - started, busy=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads) so far; 0 if it is gone."""
    try:
        rest = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def cpu_by_role(processes: dict[str, list[int]], seconds: float) -> dict[str, float]:
    """Per cent of one core each role's processes used over the next ``seconds`` (sorted by role).

    Taken when the machine should be idle (the envelope after its settle wait), it names the process
    that keeps it busy, and shows what a cluster of that size costs each component while nothing changes.
    """
    before = {role: sum(cpu_seconds(p) for p in pids) for role, pids in processes.items()}
    time.sleep(seconds)
    after = {role: sum(cpu_seconds(p) for p in pids) for role, pids in processes.items()}
    return {role: round(100 * (after[role] - before[role]) / seconds, 1) for role in sorted(processes)}


def proc_status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` (peak RSS) of a process in KiB, from ``/proc/PID/status``; empty if gone."""
    values: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        return {}
    return values


def children(pid: int) -> list[int]:
    """Direct child pids of ``pid`` (every thread's list), e.g. gunicorn's worker under its master."""
    found: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tasks = list(task_dir.iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return sorted(set(found))


def subprocess_env() -> dict[str, str]:
    """The environment for the harness's own Python subprocesses: ``hack/`` and ``testbed`` importable.

    ``testbed/`` is not installed into ``.venv`` (it is not part of the wheel), so the checkout goes on
    the path too; output is unbuffered.
    """
    path = os.pathsep.join(p for p in (str(HACK), str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def finish_recorder(recorder: subprocess.Popen[str], timeout: float) -> str:
    """Wait for a profiler subprocess and return its stderr; kill it if it has not ended in ``timeout``.

    A profiler that hangs (py-spy attached to a worker of 300 threads once did not return after its
    11 s recording) must cost its own figures, never the cluster sections after it.
    """
    try:
        _, err = recorder.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        recorder.kill()
        _, err = recorder.communicate()
        return f"did not finish within {timeout:.0f} s and was killed; {err or ''}"
    return err or ""
