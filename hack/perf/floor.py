"""The floor: what the extender protocol costs when the extender does nothing, in three stacks.

A null extender passes every candidate in ``filter`` and scores nothing in ``prioritize`` (it has no
``bind``: kube-scheduler binds itself). Each floor is one null extender with a kube-scheduler of its own,
configured as the shipped one (``manifests/scheduler-config.yaml``: its profile's plugin arguments,
every node scored, weight 5, ``nodeCacheCapable``) except for the extender's URL and verbs, so its
throughput against the baseline's is the share of a pod's time that two round trips take, whatever the
extender decides. Stacks:

- ``null-flask``: the extender's worker (``extender.worker.FrontWorker``) and Flask, as phalanx served
  every verb before ``extender.hot`` (``perf.nullext.flask_app``);
- ``null-front``: the same worker answering the two verbs without Flask, with msgspec, as
  ``extender.hot`` does now (``perf.nullext.front_app``);
- ``null-go``: Go's ``net/http`` and ``encoding/json`` (``hack/perf/nullext/main.go``, built here with
  the Go toolchain ``hack/bootstrap`` needs anyway), kube-scheduler's own language.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from localbed import free_port

from perf.bed import BenchBed, with_client_limits
from perf.common import REPO, Progress

FLOORS = ("null-flask", "null-front", "null-go")
"""The floors, in the order each repeat runs them."""


def floor_config(profile: str, url: str, kubeconfig: str) -> str:
    """The shipped scheduler configuration with profile ``profile`` and a null extender at ``url``.

    Everything but the extender entry is the product's (plugin arguments, ``percentageOfNodesToScore``,
    the harness's client limits); the extender keeps ``filter`` and ``prioritize`` with the product's
    weight, and loses ``bind`` and ``preempt``; leader election is off (several schedulers run at once).
    """
    text = with_client_limits((REPO / "manifests" / "scheduler-config.yaml").read_text())
    text = text.split("\nextenders:", 1)[0]
    text = re.sub(r"(?m)^  kubeconfig: .*$", f"  kubeconfig: {kubeconfig}", text, count=1)
    text = re.sub(r"(?m)^  leaderElect: true$", "  leaderElect: false", text, count=1)
    text = re.sub(r"(?m)^  - schedulerName: phalanx$", f"  - schedulerName: {profile}", text, count=1)
    if f"schedulerName: {profile}" not in text or "leaderElect: false" not in text:
        msg = "manifests/scheduler-config.yaml no longer has the fields the floor configuration replaces"
        raise ValueError(msg)
    return (
        f"{text}\nextenders:\n"
        f"  - urlPrefix: {url}\n"
        "    filterVerb: filter\n"
        "    prioritizeVerb: prioritize\n"
        "    weight: 5\n"
        "    enableHTTPS: false\n"
        "    nodeCacheCapable: true\n"
        "    ignorable: false\n"
    )


@dataclass
class Floor:
    """One running null extender and the kube-scheduler that calls it (profile ``name``)."""

    name: str
    config: Path
    extender: subprocess.Popen[bytes]
    log: IO[bytes]
    scheduler: tuple[subprocess.Popen[bytes], int, IO[bytes]] | None = None


class Floors:
    """The null extenders of ``FLOORS``, started once, and their kube-schedulers, started per backlog."""

    def __init__(self, bb: BenchBed, progress: Progress) -> None:
        self.bb = bb
        self.progress = progress
        self.floors: dict[str, Floor] = {}
        self.skipped: dict[str, str] = {}

    def start(self) -> None:
        """Start every null extender that can start; a floor that cannot says why in ``skipped``."""
        kubeconfig = str(self.bb.bed.cluster.scheduler_kubeconfig)
        for name in FLOORS:
            try:
                port = free_port()
                argv = self._argv(name, port)
            except (OSError, subprocess.CalledProcessError) as exc:
                self.skipped[name] = f"{type(exc).__name__}: {exc}"
                self.progress(f"floor {name} not available: {self.skipped[name]}")
                continue
            log = open(self.bb.state_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed in stop()
            env = {**os.environ, "PHALANX_PORT": str(port), "PHALANX_THREADS": "64"}
            env["PYTHONPATH"] = os.pathsep.join([str(REPO / "hack"), str(REPO)])
            proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
            config = self.bb.state_dir / f"{name}-scheduler-config.yaml"
            config.write_text(floor_config(name, f"http://127.0.0.1:{port}", kubeconfig))
            self.floors[name] = Floor(name, config, proc, log)
            if not _healthy(f"http://127.0.0.1:{port}/healthz", proc):
                self.skipped[name] = f"its null extender did not answer (log {log.name})"
                self._stop_floor(self.floors.pop(name))
                continue
            self.progress(f"floor {name}: null extender on port {port} (pid {proc.pid})")

    def _argv(self, name: str, port: int) -> list[str]:
        if name == "null-go":
            binary = self.bb.state_dir / "nullext"
            if not binary.exists():
                self.progress("building the Go null extender (hack/perf/nullext)")
                subprocess.run(
                    ["go", "build", "-o", str(binary), "."],
                    cwd=REPO / "hack" / "perf" / "nullext",
                    check=True,
                    capture_output=True,
                )
            return [str(binary), "-addr", f"127.0.0.1:{port}"]
        app = "perf.nullext:flask_app" if name == "null-flask" else "perf.nullext:front_app"
        return [sys.executable, "-m", "gunicorn", "--config", "python:extender.gunicorn_conf", app]

    def start_scheduler(self, name: str) -> None:
        """Start the kube-scheduler of floor ``name`` (its pods wait until then)."""
        floor = self.floors[name]
        if floor.scheduler is None:
            floor.scheduler = self.bb.start_scheduler(name, floor.config)

    def stop_scheduler(self, name: str) -> None:
        """Stop the kube-scheduler of floor ``name``, if it runs."""
        floor = self.floors.get(name)
        if floor is not None and floor.scheduler is not None:
            proc, _, log = floor.scheduler
            floor.scheduler = None
            self.bb.stop_scheduler(name, proc, log)

    def stop(self) -> None:
        """Stop every floor's kube-scheduler and null extender."""
        for floor in list(self.floors.values()):
            self._stop_floor(floor)
        self.floors.clear()

    def _stop_floor(self, floor: Floor) -> None:
        self.stop_scheduler(floor.name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(floor.extender.pid, 15)
        try:
            floor.extender.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(floor.extender.pid, 9)
            floor.extender.wait(5)
        floor.log.close()


def _healthy(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2):
            return True
        time.sleep(0.2)
    return False


@contextlib.contextmanager
def running_floors(bb: BenchBed, progress: Progress) -> Iterator[Floors]:
    """``Floors`` started, and stopped whatever happens."""
    floors = Floors(bb, progress)
    try:
        floors.start()
        yield floors
    finally:
        floors.stop()
