"""The per-pod budget: where one scheduled pod's time goes, across the whole machine.

While a scheduler binds a backlog, a window of ``seconds`` (after the first binds, so start-up is left
out) is sampled from every side at once:

- the CPU time of every process of the benchmark cluster (``/proc/PID/stat``) and of the whole machine
  (``/proc/stat``), divided by the pods bound in the window: CPU milliseconds per pod, per process;
- kube-scheduler's own CPU profile (``/debug/pprof/profile``, on its secure port with the admin token;
  ``go tool pprof -traces`` reads it offline), split by what each sample was doing: its extender client
  (the ``HTTPExtender`` calls, their JSON encoding and decoding, the HTTP/1.1 connection's loops), its
  in-tree filter and score plugins, logging, informers, the Go garbage collector;
- kube-scheduler's histograms (``/metrics``): the scheduling algorithm's wall time per pod and its
  in-tree extension points, so the part spent waiting for the extender can be read off;
- kube-apiserver's (``/metrics``): the requests it served per pod by verb and resource, with their
  server time, and the watch events it sent (``perf.budget_split.api_requests``);
- the extender worker, sampled by py-spy (``--gil``: only the thread holding the GIL, so samples are
  Python CPU) and split by thread and by layer (gunicorn, Flask, body decoding, pod parsing, the core,
  rendering and encoding the reply, the watch threads that feed the cache, the queue view's rebuild);
  and the extender's own request histogram: the time its routes take per verb;
- the placement manager, sampled the same way and split by pass and thread (its round's passes, the
  release pass, the ungating pool, the event writer, the watches), for phalanx in either mode: as the
  framework sidecar (``phalanx-sidecar``) it is where phalanx's per-pod work is, with no extender.

The probe costs some CPU itself (py-spy reads the worker's memory 100 times a second; Go's profiler
is cheap), so the budget is taken on its own backlog, not the one whose pods/s the report compares.
The analysis is ``perf.budget_split``.
"""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perf.bed import BenchBed
from perf.budget_split import api_requests, go_split, metric_sums, placement_split, python_split
from perf.common import SIDECAR, Progress, cpu_seconds, finish_recorder
from perf.throughput import backlog, fitting
from perf.watch import BindWatch

WINDOW_SECONDS = 15.0
"""How long the budget window lasts (it ends earlier if the backlog is all bound)."""

WARMUP_SECONDS = 2.0
"""Seconds after the first bind before the window opens (the scheduler's first cycles are left out)."""

PY_SPY_RATE = 100
"""py-spy samples per second."""

_TICK = os.sysconf("SC_CLK_TCK")


def _machine() -> tuple[float, float]:
    """(busy, total) CPU seconds of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    total = sum(fields[:8])
    return (total - fields[3] - fields[4]) / _TICK, total / _TICK


def _get(url: str, token: str, timeout: float) -> bytes:
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving certificate, on loopback
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=timeout, context=insecure) as reply:
        data: bytes = reply.read()
    return data


def _plain_get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        data: bytes = reply.read()
    return data


def _go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    default = Path("/usr/local/go/bin/go")
    return str(default) if default.exists() else None


class BudgetProbe:
    """Samples one backlog's window; ``start`` is a ``perf.throughput.BacklogProbe``."""

    def __init__(
        self, bb: BenchBed, which: str, nodes: int, out_dir: Path, progress: Progress, seconds: float
    ) -> None:
        self.bb = bb
        self.which = which
        self.nodes = nodes
        self.out_dir = out_dir
        self.progress = progress
        self.seconds = seconds
        self._result: dict[str, Any] = {}
        self._thread: threading.Thread | None = None

    def start(self, watch: BindWatch, count: int) -> Callable[[], dict[str, Any]]:
        """Open the window in a thread once binds have begun; return the function that collects it."""
        self._thread = threading.Thread(target=self._run, args=(watch, count), name="budget", daemon=True)
        self._thread.start()
        return self.collect

    def collect(self) -> dict[str, Any]:
        """The window's figures (waits for the window to close)."""
        if self._thread is not None:
            self._thread.join(self.seconds + 120)
        return self._result

    def _run(self, watch: BindWatch, count: int) -> None:
        try:
            self._result = self._window(watch, count)
        except Exception as exc:  # a failed probe loses the budget, not the run
            self._result = {"error": f"{type(exc).__name__}: {exc}"}

    def _window(self, watch: BindWatch, count: int) -> dict[str, Any]:
        before = len(watch.bound_before_start)
        deadline = time.monotonic() + 120
        while len(watch.bound_at) <= before and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(WARMUP_SECONDS)
        out = self.out_dir
        out.mkdir(parents=True, exist_ok=True)
        port = self.bb.scheduler_port(self.which)
        token = self.bb.admin_token
        base = f"https://127.0.0.1:{port}"
        procs = self.bb.processes()
        sched_role = "baseline kube-scheduler" if self.which == "baseline" else "kube-scheduler"
        ext_url = self.bb.extender_url
        pprof_path = out / f"budget-{self.which}-{self.nodes}-kube-scheduler.pprof"
        spy_path = out / f"budget-{self.which}-{self.nodes}-extender.txt"
        profile: dict[str, Any] = {}

        def fetch_profile() -> None:
            try:
                url = f"{base}/debug/pprof/profile?seconds={int(self.seconds)}"
                pprof_path.write_bytes(_get(url, token, self.seconds + 30))
                profile["ok"] = True
            except Exception as exc:  # kube-scheduler without profiling: the rest of the budget stands
                profile["error"] = f"{type(exc).__name__}: {exc}"

        api = self.bb.bed.cluster.server
        api_metrics0 = _get(f"{api}/metrics", token, 10).decode()
        sched_metrics0 = _get(f"{base}/metrics", token, 10).decode()
        ext_metrics0 = _plain_get(f"{ext_url}/metrics").decode() if self.which == "phalanx" else ""
        spy = placement_spy = None
        spy_bin = Path(sys.executable).with_name("py-spy")
        workers = procs.get("extender", [])
        managers = procs.get("placement manager", [])
        placement_path = out / f"budget-{self.which}-{self.nodes}-placement.txt"

        def record(pid: int, path: Path) -> subprocess.Popen[str]:
            argv = [str(spy_bin), "record", "--pid", str(pid), "-r", str(PY_SPY_RATE), "-f", "raw"]
            argv += ["--gil", "--threads", "--nonblocking", "-d", str(int(self.seconds)), "-o", str(path)]
            return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

        if self.which == "phalanx" and spy_bin.exists() and len(workers) >= 2:
            spy = record(workers[-1], spy_path)
        if self.which != "baseline" and spy_bin.exists() and managers:
            placement_spy = record(managers[0], placement_path)
        fetcher = threading.Thread(target=fetch_profile, daemon=True)
        fetcher.start()
        cpu0 = {role: sum(cpu_seconds(p) for p in pids) for role, pids in procs.items()}
        busy0, total0 = _machine()
        t0 = time.monotonic()
        end = t0 + self.seconds
        while time.monotonic() < end and len(watch.bound_at) < count:
            time.sleep(0.1)
        t1 = time.monotonic()
        cpu1 = {role: sum(cpu_seconds(p) for p in pids) for role, pids in procs.items()}
        busy1, total1 = _machine()
        sched_metrics1 = _get(f"{base}/metrics", token, 10).decode()
        api_metrics1 = _get(f"{api}/metrics", token, 10).decode()
        ext_metrics1 = _plain_get(f"{ext_url}/metrics").decode() if self.which == "phalanx" else ""
        pods = sum(1 for at in list(watch.bound_at.values()) if t0 < at <= t1)
        result: dict[str, Any] = {
            "scheduler": self.which,
            "nodes": self.nodes,
            "window_seconds": round(t1 - t0, 2),
            "pods": pods,
            "backlog_ended_in_window": t1 < end,
        }
        if pods == 0:
            result["error"] = "no pod was bound in the window"
            return result
        per_pod = 1000.0 / pods
        result["wall_ms_per_pod"] = round((t1 - t0) * per_pod, 2)
        result["cores"] = os.cpu_count()
        result["machine_busy_ms_per_pod"] = round((busy1 - busy0) * per_pod, 2)
        result["machine_idle_share"] = round(1 - (busy1 - busy0) / max(1e-9, total1 - total0), 3)
        cpu = {role: round((cpu1[role] - cpu0[role]) * per_pod, 2) for role in procs}
        cpu["rest of the machine"] = round((busy1 - busy0) * per_pod - sum(cpu.values()), 2)
        result["cpu_ms_per_pod"] = cpu
        result["kube_scheduler_wall_ms_per_pod"] = {
            k: round(v * per_pod, 3)
            for k, v in metric_sums(sched_metrics0, sched_metrics1, self.which).items()
        }
        result["api_requests"] = api_requests(api_metrics0, api_metrics1, pods)
        if self.which == "phalanx":
            result["extender_routes"] = _route_times(ext_metrics0, ext_metrics1, pods)
        fetcher.join(self.seconds + 40)
        go = _go()
        if profile.get("ok") and go is not None:
            traces = subprocess.run(
                [go, "tool", "pprof", "-traces", str(pprof_path)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            ).stdout
            result["kube_scheduler_profile"] = go_split(traces, cpu.get(sched_role, 0.0))
            result["kube_scheduler_profile"]["file"] = str(pprof_path)
        else:
            result["kube_scheduler_profile"] = {"error": profile.get("error", "go is not installed")}
        if spy is not None:
            err = finish_recorder(spy, self.seconds + 60)
            if spy_path.exists() and spy.returncode == 0:
                samples_ms = 1000.0 / PY_SPY_RATE
                result["extender_profile"] = python_split(spy_path.read_text(), samples_ms / pods)
                result["extender_profile"]["file"] = str(spy_path)
            else:
                result["extender_profile"] = {"error": f"py-spy failed: {err.strip()[-300:]}"}
        if placement_spy is not None:
            err = finish_recorder(placement_spy, self.seconds + 60)
            if placement_path.exists() and placement_spy.returncode == 0:
                samples_ms = 1000.0 / PY_SPY_RATE
                result["placement_profile"] = placement_split(placement_path.read_text(), samples_ms / pods)
                result["placement_profile"]["file"] = str(placement_path)
            else:
                result["placement_profile"] = {"error": f"py-spy failed: {err.strip()[-300:]}"}
        self.progress(
            f"budget {self.which} @ {self.nodes} nodes: {pods} pods in {t1 - t0:.1f}s, "
            f"machine {result['machine_busy_ms_per_pod']:.1f} CPU-ms/pod"
        )
        return result


def _route_times(before: str, after: str, pods: int) -> dict[str, Any]:
    """Per verb: calls per pod, ms per call and ms per pod inside the extender's routes (its histogram)."""
    from perf.budget_split import histogram_deltas

    out: dict[str, Any] = {}
    for verb, (seconds, calls) in histogram_deltas(
        before, after, "phalanx_extender_request_duration_seconds", "verb"
    ).items():
        if calls > 0:
            out[verb] = {
                "calls_per_pod": round(calls / pods, 3),
                "ms_per_call": round(seconds * 1000 / calls, 3),
                "ms_per_pod": round(seconds * 1000 / pods, 3),
            }
    return out


def measure_budget(
    bb: BenchBed,
    which: str,
    nodes: int,
    out_dir: Path,
    progress: Progress,
    *,
    rate_hint: float | None = None,
    seconds: float = WINDOW_SECONDS,
    minimum: int = 1000,
) -> dict[str, Any]:
    """One backlog through ``which`` scheduler with the budget window sampled; the pods are deleted after.

    The backlog has ``minimum`` pods, more if ``rate_hint`` (pods/s measured earlier at this size) says
    they would be bound before the window closes.
    """
    count = fitting(minimum, nodes)
    if rate_hint:  # enough to outlast the window at the rate measured before, at most 3,000
        count = max(count, min(fitting(3000, nodes), int(rate_hint * (WARMUP_SECONDS + seconds + 5))))
    namespace = bb.namespace(f"perf-{which}-{nodes}-budget")
    probe = BudgetProbe(bb, which, nodes, out_dir, progress, seconds)
    figures = backlog(bb, which, nodes, namespace, count, progress, probe=probe.start)
    result: dict[str, Any] = figures.pop("probe", {})
    result["profiled_pods_per_second"] = figures.get("pods_per_second")
    progress(f"budget {which} @ {nodes} nodes: deleting the backlog")
    bb.delete_pods(namespace)
    if which == "baseline":
        bb.stop_baseline()
    elif which == SIDECAR:
        bb.resume_phalanx()  # the sections after this one expect phalanx as shipped
    return result
