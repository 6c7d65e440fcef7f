"""The per-pod budget's analysis: profiles and histograms split into the parts a change can move.

Pure functions of text (``go tool pprof -traces`` output, py-spy's raw collapsed stacks, Prometheus
text), so they are tested on small fixtures without a cluster. The sampling is ``perf.budget``.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

EXTENSION_POINTS = ("PreFilter", "Filter", "PostFilter", "PreScore", "Score", "Reserve", "Permit", "PreBind")
"""kube-scheduler's in-tree extension points timed on the scheduling cycle (Bind runs in the binding
cycle, off the critical path)."""

GO_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("extender client: JSON encode", ("(*HTTPExtender).send", "encoding/json.Marshal")),
    ("extender client: JSON decode", ("(*HTTPExtender).send", "encoding/json.(*Decoder)")),
    ("extender client: HTTP and the rest of its calls", ("(*HTTPExtender)",)),
    ("extender client: HTTP/1.1 connection loops", ("net/http.(*persistConn)",)),
    ("phalanx's framework plugin (PhalanxPlan)", ("phalanx.dev/sidecar/plan",)),
    ("in-tree filter plugins", ("RunFilterPlugins",)),
    ("in-tree score plugins", ("RunScorePlugins",)),
    ("in-tree score plugins", ("RunPreScorePlugins",)),
    ("logging (-v=2)", ("k8s.io/klog",)),
    ("informers: watch, decode, event handlers", ("k8s.io/client-go/tools/cache",)),
    ("API client (binds, events, status)", ("http2",)),
    ("Go garbage collector", ("runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge")),
    ("scheduling cycle: the rest", ("(*Scheduler).scheduleOne", "(*Scheduler).schedulingCycle")),
    ("binding cycle: the rest", ("(*Scheduler).bindingCycle", "(*Scheduler).runBindingCycle")),
)
"""(part, frames): a sample counts for the first part whose frames *all* occur on its stack, except that
one-frame rules need only that frame; order matters (the extender's JSON before its other work)."""

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "hrs": 3600.0}
_VALUE = re.compile(r"^\s*([0-9.]+)(ns|us|µs|ms|s|min|hrs)\s+(\S.*)$")


def go_traces(text: str) -> list[tuple[float, list[str]]]:
    """(seconds, frames leaf first) of every sample group in ``go tool pprof -traces`` output."""
    traces: list[tuple[float, list[str]]] = []
    for block in re.split(r"^-+\+-+$", text, flags=re.M)[1:]:
        lines = [line for line in block.splitlines() if line.strip()]
        found = [(i, m) for i, m in enumerate(map(_VALUE.match, lines)) if m is not None][:1]
        if not found:
            continue  # the closing separator (labels come before the value line)
        first, match = found[0]
        value = float(match.group(1)) * _UNITS[match.group(2)]
        frames = [match.group(3).strip()] + [line.strip() for line in lines[first + 1 :]]
        traces.append((value, frames))
    return traces


def _go_part(frames: list[str]) -> str:
    stack = "\n".join(frames)
    for part, needles in GO_PARTS:
        if all(n in stack for n in needles):
            return part
    return "other (runtime, syscalls, timers)"


def go_split(traces_text: str, cpu_ms_per_pod: float) -> dict[str, Any]:
    """kube-scheduler's CPU per pod split by ``GO_PARTS``.

    Each part gets its share of the profile's samples times the process's CPU ms per pod (from
    ``/proc``, which the profile's own total should match).
    """
    parts: dict[str, float] = collections.defaultdict(float)
    for seconds, frames in go_traces(traces_text):
        parts[_go_part(frames)] += seconds
    total = sum(parts.values())
    return {
        "profile_cpu_seconds": round(total, 3),
        "parts_ms_per_pod": {
            part: round(cpu_ms_per_pod * s / total, 3)
            for part, s in sorted(parts.items(), key=lambda kv: -kv[1])
        }
        if total
        else {},
    }


PY_REQUEST_PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("bind: API call", ("kubeio/binding.py", "kubeio/http.py")),
    ("parse the pod (kubeio.convert)", ("pod_from_api (",)),
    ("read and decode the body", ("_body (extender/routes.py", "decode (extender/wire.py")),
    ("render and encode the reply", ("filter_result (", "host_priority_list (", "_json (extender/routes.py")),
    ("metrics", ("prometheus_client/",)),
    ("the core's decision (scheduling/)", ("scheduling/",)),
    (
        "service: read, apply (extender/service.py ...)",
        (
            "extender/service.py",
            "extender/view_keeper.py",
            "extender/nudger.py",
            "extender/decisions.py",
            "extender/ledger.py",
        ),
    ),
    ("routes and wire glue", ("extender/routes.py", "extender/wire.py")),
    ("Flask and werkzeug", ("flask/", "werkzeug/")),
    ("WSGI environ and reply (extender/worker.py)", ("extender/worker.py",)),
)
"""(part, needles): a request thread's sample counts for the first part one of whose needles occurs on
its stack."""

PY_THREADS: tuple[tuple[str, str], ...] = (
    ("watch-pods", "cache: pod watch events (decode, convert, apply, listeners)"),
    ("watch-nodes", "cache: node watch events"),
    ("watch-", "cache: other watches"),
    ("queues", "queue view rebuild (every second)"),
    ("nudger", "nudger"),
    ("recovery", "gang recovery loop"),
    ("MainThread", "HTTP front: accept, read, parse, write (kubeio/serving.py, h11)"),
)
"""(thread name prefix, part) for threads that serve no request."""

_THREAD = re.compile(r"^thread \(\d+\): ([^;]*);?")


def _verb(stack: str) -> str | None:
    for verb, frame in (
        ("filter", "filter_ (extender/routes.py"),
        ("prioritize", "prioritize (extender/routes.py"),
        ("bind", "bind (extender/routes.py"),
        ("preempt", "preempt (extender/routes.py"),
    ):
        if frame in stack:
            return verb
    return None


def py_stacks(raw: str) -> Iterable[tuple[str, str, int]]:
    """(thread name, stack, samples) of each line of py-spy's raw output (``--threads``)."""
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        match = _THREAD.match(stack)
        yield (match.group(1) if match else "?"), stack, int(count)


def python_split(raw: str, ms_per_sample_per_pod: float) -> dict[str, Any]:
    """The extender worker's GIL-holding samples split by verb and part, in ms per pod.

    ``ms_per_sample_per_pod``: one sample's milliseconds (1000 / rate) divided by the pods of the window.
    """
    parts: collections.Counter[str] = collections.Counter()
    total = 0
    for thread, stack, count in py_stacks(raw):
        total += count
        verb = _verb(stack)
        if verb is None and "extender/worker.py" in stack and "handle" in stack:
            verb = "request, before routing"
        if verb is not None:
            part = next((p for p, needles in PY_REQUEST_PARTS if any(n in stack for n in needles)), "other")
            parts[f"{verb}: {part}"] += count
            continue
        label = next((p for prefix, p in PY_THREADS if thread.startswith(prefix)), f"thread {thread}")
        parts[label] += count
    by_verb: collections.Counter[str] = collections.Counter()
    for label, count in parts.items():
        by_verb[label.split(":")[0] if ":" in label else label] += count
    return {
        "samples": total,
        "gil_ms_per_pod": round(total * ms_per_sample_per_pod, 3),
        "parts_ms_per_pod": {p: round(c * ms_per_sample_per_pod, 3) for p, c in parts.most_common()},
        "groups_ms_per_pod": {p: round(c * ms_per_sample_per_pod, 3) for p, c in by_verb.most_common()},
    }


PLACEMENT_ROUND: tuple[tuple[str, str], ...] = (
    ("placement/queue_pass.py", "round: queue pass (status, reclaim)"),
    ("placement/elastic_pass.py", "round: elastic pass"),
    ("placement/gang_pass.py", "round: gang pass"),
    ("placement/refusal_pass.py", "round: refusal pass"),
    ("placement/bypass_pass.py", "round: bypass pass"),
    ("placement/round.py", "round: read the cluster, queue view"),
)
"""(file, part): a sample of the placement manager's main thread (its round) counts for the first part
whose file is on its stack."""

PLACEMENT_THREADS: tuple[tuple[str, str], ...] = (
    ("release-pass", "release pass: decide, tell"),
    ("ungate", "release pass: ungate patches"),
    ("events", "events: write"),
    ("watch-pods", "cache: pod watch events"),
    ("watch-", "cache: other watches"),
    ("webhook-watch", "webhooks: watch their configuration"),
    ("webhook", "webhooks: serve (the gate's door, pins)"),
    ("leader", "leader election"),
)
"""(thread name prefix, part) for the placement manager's other threads; the rest are "other threads"
(the webhooks' request threads among them)."""


def placement_split(raw: str, ms_per_sample_per_pod: float) -> dict[str, Any]:
    """The placement manager's GIL-holding samples split by pass and thread, in ms per pod.

    Its main thread runs the round (``placement.round``: queue, elastic, gang, refusal and bypass
    passes); the release pass, its ungating pool, the event writer and the watches have threads of
    their own.
    """
    parts: collections.Counter[str] = collections.Counter()
    total = 0
    for thread, stack, count in py_stacks(raw):
        total += count
        if thread == "MainThread":
            label = next((p for needle, p in PLACEMENT_ROUND if needle in stack), "round: other")
        else:
            label = next((p for prefix, p in PLACEMENT_THREADS if thread.startswith(prefix)), "other threads")
        parts[label] += count
    return {
        "samples": total,
        "gil_ms_per_pod": round(total * ms_per_sample_per_pod, 3),
        "parts_ms_per_pod": {p: round(c * ms_per_sample_per_pod, 3) for p, c in parts.most_common()},
    }


def histogram_deltas(before: str, after: str, family: str, by: str) -> dict[str, tuple[float, float]]:
    """(sum, count) increase of histogram ``family`` between two scrapes, per value of label ``by``."""

    def read(text: str) -> dict[str, list[float]]:
        out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
        for fam in text_string_to_metric_families(text):
            if fam.name != family:
                continue
            for sample in fam.samples:
                key = sample.labels.get(by, "")
                if sample.name == f"{family}_sum":
                    out[key][0] += sample.value
                elif sample.name == f"{family}_count":
                    out[key][1] += sample.value
        return out

    old, new = read(before), read(after)
    return {k: (v[0] - old.get(k, [0.0, 0.0])[0], v[1] - old.get(k, [0.0, 0.0])[1]) for k, v in new.items()}


LONG_RUNNING = frozenset({"WATCH", "WATCHLIST", "CONNECT"})
"""Verbs whose request duration is a stream's life, not a request's cost."""

PER_POD_FLOOR = 0.01
"""Request kinds and watched resources seen less often than this per pod are left out: leases, discovery
and the like, which a 15 s window divides into noise."""


def api_requests(before: str, after: str, pods: int) -> dict[str, dict[str, float]]:
    """What kube-apiserver served between two scrapes of its ``/metrics``, per bound pod.

    Per request kind ("VERB resource/subresource", from ``apiserver_request_duration_seconds``): calls
    and server milliseconds per pod, most milliseconds first; long-running verbs left out. Per watched
    resource ("watch events resource", from ``apiserver_watch_events_total``): events sent to watchers
    per pod. Why the API server works harder for one scheduler's pods than another's, by what it serves.
    Kinds under ``PER_POD_FLOOR`` per pod are left out.
    """
    old, new = _by_labels(before), _by_labels(after)
    rows: dict[str, dict[str, float]] = {}
    for key, (seconds, calls) in new.items():
        seconds -= old.get(key, (0.0, 0.0))[0]
        calls -= old.get(key, (0.0, 0.0))[1]
        if calls / pods >= PER_POD_FLOOR:
            rows[key] = {
                "calls_per_pod": round(calls / pods, 3),
                "ms_per_pod": round(seconds * 1000 / pods, 3),
            }
    ordered = dict(sorted(rows.items(), key=lambda kv: (-kv[1].get("ms_per_pod", 0.0), kv[0])))
    return ordered | _watch_events(before, after, pods)


def _by_labels(text: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of ``apiserver_request_duration_seconds`` per verb, resource and subresource."""
    family = "apiserver_request_duration_seconds"
    out: dict[str, tuple[float, float]] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name != family:
            continue
        for sample in fam.samples:
            verb = sample.labels.get("verb", "")
            if verb in LONG_RUNNING:
                continue
            resource = "/".join(
                filter(None, (sample.labels.get("resource"), sample.labels.get("subresource")))
            )
            key = f"{verb} {resource or '-'}"
            seconds, calls = out.get(key, (0.0, 0.0))
            if sample.name == f"{family}_sum":
                out[key] = (seconds + sample.value, calls)
            elif sample.name == f"{family}_count":
                out[key] = (seconds, calls + sample.value)
    return out


def _watch_events(before: str, after: str, pods: int) -> dict[str, dict[str, float]]:
    def read(text: str) -> dict[str, float]:
        out: dict[str, float] = collections.defaultdict(float)
        for fam in text_string_to_metric_families(text):
            if fam.name == "apiserver_watch_events":  # the client library drops the counter's _total
                for sample in fam.samples:
                    if sample.name == "apiserver_watch_events_total":
                        what = sample.labels.get("resource") or sample.labels.get("kind", "")
                        out[what] += sample.value
        return out

    old, new = read(before), read(after)
    events = {k: v - old.get(k, 0.0) for k, v in new.items()}
    return {
        f"watch events {k}": {"events_per_pod": round(v / pods, 3)}
        for k, v in sorted(events.items(), key=lambda kv: (-kv[1], kv[0]))
        if v / pods >= PER_POD_FLOOR
    }


def metric_sums(before: str, after: str, which: str) -> dict[str, float]:
    """Seconds kube-scheduler spent between two scrapes, by part of its scheduling cycle.

    The scheduling algorithm, each in-tree extension point, and the algorithm minus the in-tree filter
    and score (its extender calls plus glue).
    """
    algorithm = histogram_deltas(before, after, "scheduler_scheduling_algorithm_duration_seconds", "profile")
    points = histogram_deltas(
        before, after, "scheduler_framework_extension_point_duration_seconds", "extension_point"
    )
    out = {"scheduling algorithm (filter + score, extenders included)": sum(s for s, _ in algorithm.values())}
    inside = 0.0
    for point in EXTENSION_POINTS:
        seconds = points.get(point, (0.0, 0.0))[0]
        out[f"in-tree {point}"] = seconds
        if point in ("PreFilter", "Filter", "PreScore", "Score"):
            inside += seconds
    out["algorithm minus in-tree filter and score"] = (
        out["scheduling algorithm (filter + score, extenders included)"] - inside
    )
    out["Bind (binding cycle)"] = points.get("Bind", (0.0, 0.0))[0]
    del which
    return out
