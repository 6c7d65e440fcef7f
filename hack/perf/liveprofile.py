"""Profile of the running extender (gunicorn worker, production composition) under direct calls.

The in-process profile (``perf.profiling``) builds the service by hand and so leaves out whatever the
composition root adds (queue admission, the nudger, metrics as configured). This one samples the real
gunicorn worker with py-spy while the harness sends it ``filter`` or ``prioritize`` calls over every node
of the cluster, one at a time, and reports the hottest *lines* (py-spy samples the line being run), which
is what a change needs. py-spy is installed into ``.venv`` by ``hack/bench``; without it, or without the
permission to read another process's memory, the section says so.
"""

from __future__ import annotations

import collections
import http.client
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from perf.bed import BenchBed
from perf.common import Progress, finish_recorder
from perf.requests import probe_pod

PRODUCT = ("scheduling/", "kubeio/", "extender/")


def _py_spy() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


def aggregate(raw: Path, top: int = 12) -> dict[str, Any]:
    """Self samples per line and inclusive samples per product line from py-spy's raw (collapsed) output."""
    self_count: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any("routes.py" in f for f in frames):  # only request threads serving a call
            continue
        n = int(count)
        total += n
        self_count[frames[-1]] += n
        for frame in set(frames):
            if any(p in frame for p in PRODUCT):
                inclusive[frame] += n

    def rows(counter: collections.Counter[str]) -> list[dict[str, Any]]:
        return (
            [{"frame": f, "share": round(n / total, 3)} for f, n in counter.most_common(top)] if total else []
        )

    return {"samples": total, "self": rows(self_count), "product_inclusive": rows(inclusive)}


def live_profile(bb: BenchBed, seconds: float, out_dir: Path, progress: Progress) -> dict[str, Any]:
    """Record the extender worker while it answers filter, then prioritize, for ``seconds`` each."""
    spy = _py_spy()
    pids = bb.extender_pids()
    if spy is None or len(pids) < 2:
        return {"available": False, "reason": "py-spy is not installed" if spy is None else "no worker"}
    worker = pids[-1]
    parts = urlsplit(bb.extender_url)
    result: dict[str, Any] = {"available": True, "nodes": len(bb.node_names), "worker_pid": worker}
    out_dir.mkdir(parents=True, exist_ok=True)
    for verb in ("filter", "prioritize"):
        raw = out_dir / f"live-{verb}-{len(bb.node_names)}.txt"
        body = orjson.dumps({"Pod": probe_pod(f"live-{verb}", 4), "Nodes": None, "NodeNames": bb.node_names})
        argv = [spy, "record", "--pid", str(worker), "-r", "250", "-f", "raw", "-o", str(raw)]
        argv += ["-d", str(int(seconds) + 1), "--nonblocking"]
        with subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as recorder:
            time.sleep(0.5)
            conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
            calls, end = 0, time.monotonic() + seconds
            try:
                while time.monotonic() < end:
                    conn.request("POST", f"/{verb}", body=body, headers={"Content-Type": "application/json"})
                    conn.getresponse().read()
                    calls += 1
            finally:
                conn.close()
            err = finish_recorder(recorder, seconds + 30)
        if not raw.exists() or recorder.returncode != 0:
            progress(f"live profile {verb}: py-spy failed ({err.strip()[-200:]}); the run goes on without it")
            return {"available": False, "reason": f"py-spy failed: {err.strip()[-300:]}"}
        result[verb] = {"calls": calls, "raw": str(raw), **aggregate(raw)}
        progress(
            f"live profile {verb} @ {len(bb.node_names)} nodes: {calls} calls, "
            f"{result[verb]['samples']} samples"
        )
    return result
