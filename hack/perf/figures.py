"""Every number of a run's JSON as a flat list of labelled figures, so two runs can be lined up.

The JSON mirrors the sections of the printed report (``perf.report.render``): ``sizes`` (per node count:
``baseline`` and ``phalanx`` throughput and latency, ``calls``, ``gangs``), ``fair_share``, ``elastic``,
``memory`` and ``profile``. A figure's label is built from what identifies it (node count, verb, pod
shape, gang size), never from its value, so the same figure of two runs has the same label even when
the runs measured different sizes or sections. A missing section, field or NaN (written as null) simply
yields no figure; nothing here raises on a run that stopped half-way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from perf.budget_report import budget_figures
from perf.report import p50_ratio, paced_p50, pods_per_second, pods_ratio


@dataclass(frozen=True, slots=True)
class Figure:
    """One number of one run.

    Attributes:
        section: the report section it belongs to, e.g. "1. scheduling"; groups the compare table.
        label: what it is, e.g. "1,000 nodes, phalanx, backlog pods/s"; unique within a run.
        value: the number, in the unit the label names.
        fmt: how to print it, e.g. "{:.1f}".
    """

    section: str
    label: str
    value: float
    fmt: str

    @property
    def text(self) -> str:
        """The value formatted for a table."""
        return self.fmt.format(self.value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _count(value: Any) -> str:
    """A count with thousands separators, or the value as it is (a damaged file must not raise)."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


SCHEDULING, BUDGET, CALLS, GANGS, FAIR, ELASTIC, SIMULATOR, MEMORY, PROFILE = (
    "1. scheduling through kube-scheduler",
    "1b. per-pod budget, ms per bound pod",
    "2. extender per call over HTTP, ms",
    "3. gang time-to-bound, last created -> all bound, s",
    "4. fair-share recompute, s",
    "4b. elastic planning round, s",
    "4c. trace simulator, simulated events/s",
    "5. extender memory, MiB",
    "6. in-process profile, ms",
)


def _scheduling(sizes: list[dict[str, Any]]) -> Iterator[tuple[str, str, float | None, str]]:
    for size in sizes:
        nodes = size.get("nodes")
        for which in ("baseline", "phalanx"):
            latency = (size.get(which) or {}).get("latency_ms") or {}
            at = f"{_count(nodes)} nodes, {which}"
            yield SCHEDULING, f"{at}, backlog pods/s", pods_per_second(size, which), "{:.1f}"
            yield SCHEDULING, f"{at}, paced p50 ms", paced_p50(size, which), "{:.0f}"
            yield SCHEDULING, f"{at}, paced p99 ms", _number(latency.get("p99")), "{:.0f}"
        yield SCHEDULING, f"{_count(nodes)} nodes, pods/s phalanx / baseline", pods_ratio(size), "{:.2f}x"
        yield SCHEDULING, f"{_count(nodes)} nodes, paced p50 phalanx / baseline", p50_ratio(size), "{:.2f}x"


def _calls(calls: dict[str, Any], at: str) -> Iterator[tuple[str, str, float | None, str]]:
    for verb in ("filter", "prioritize"):
        for gpus, summary in sorted((calls.get(verb) or {}).items()):
            if isinstance(summary, dict):
                for q in ("p50", "p99"):
                    label = f"{at}, {verb} {gpus}-GPU pod {q}"
                    yield CALLS, label, _number(summary.get(q)), "{:.2f}"


def _sizes(sizes: list[dict[str, Any]]) -> Iterator[tuple[str, str, float | None, str]]:
    yield from _scheduling(sizes)
    for size in sizes:
        for label, value in budget_figures(size):
            yield BUDGET, f"{_count(size.get('nodes'))} nodes, {label}", value, "{:.2f}"
    for size in sizes:
        calls = size.get("calls")
        if isinstance(calls, dict):
            yield from _calls(calls, f"{_count(calls.get('candidates', size.get('nodes')))} candidates")
    for size in sizes:
        for gang in _dicts(size.get("gangs")):
            shape = "baseline, single pods" if gang.get("baseline_single_pods") else "gang"
            label = f"{_count(gang.get('nodes', size.get('nodes')))} nodes, {shape} of {gang.get('size')}"
            yield GANGS, label, _number(gang.get("last_created_to_all_bound_seconds")), "{:.2f}"


def _offline(results: dict[str, Any]) -> Iterator[tuple[str, str, float | None, str]]:
    for row in _dicts((results.get("fair_share") or {}).get("rows")):
        label = f"{_count(row.get('queues', 0))} queues, {_count(row.get('groups', 0))} pending groups"
        yield FAIR, label, _number(row.get("recompute_seconds")), "{:.3f}"
    for row in _dicts(results.get("elastic")):
        label = f"{_count(row.get('jobs', 0))} elastic jobs on {_count(row.get('nodes', 0))} nodes"
        yield ELASTIC, label, _number(row.get("seconds")), "{:.2f}"
    for row in _dicts(results.get("simulator")):
        label = f"Philly window, {row.get('policy')}, {_count(row.get('jobs', 0))} jobs"
        yield SIMULATOR, label, _number(row.get("events_per_s")), "{:,.0f}"
    memory = results.get("memory") or {}
    cache = memory.get("cache") or {}
    cache_at = f"ClusterCache subprocess, {_count(cache.get('nodes'))} nodes / {_count(cache.get('pods'))}"
    for key, what in (("rss_kib", "RSS"), ("peak_rss_kib", "peak")):
        kib = _number(cache.get(key))
        yield MEMORY, f"{cache_at} pods, {what}", None if kib is None else kib / 1024, "{:.0f}"
    for probe in _dicts(memory.get("gunicorn")):
        at = f"gunicorn worker, {_count(probe.get('nodes'))} nodes / {_count(probe.get('pods'))} pods"
        kib = _number(probe.get("rss_kib"))
        yield MEMORY, f"{at} ({probe.get('when')}), RSS", None if kib is None else kib / 1024, "{:.0f}"
    envelope = memory.get("envelope") or {}
    first = envelope.get("first_stage") or {}
    if isinstance(first, dict) and isinstance(first.get("calls"), dict):
        at = f"{_count(envelope.get('nodes', 0))} candidates +{_count(first.get('pods', 0))} pods"
        yield from _calls(first["calls"], at)
    if isinstance(envelope.get("calls"), dict):
        at = f"{_count(envelope.get('nodes', 0))} candidates +{_count(envelope.get('pods', 0))} pods"
        yield from _calls(envelope["calls"], at)
    for case in _dicts((results.get("profile") or {}).get("cases")):
        ms = case.get("in_process_ms") or {}
        for q in ("p50", "p99"):
            label = f"{case.get('verb')} @ {_count(case.get('nodes', 0))} candidates, in-process {q}"
            yield PROFILE, label, _number(ms.get(q)), "{:.2f}"


def figures(results: dict[str, Any]) -> list[Figure]:
    """Every figure the run has, in report order; a label seen twice keeps its last value."""
    found: dict[str, Figure] = {}
    for section, label, value, fmt in (*_sizes(_dicts(results.get("sizes"))), *_offline(results)):
        if value is not None:
            found[label] = Figure(section, label, value, fmt)
    return in_report_order(found.values())


SECTIONS = (SCHEDULING, BUDGET, CALLS, GANGS, FAIR, ELASTIC, SIMULATOR, MEMORY, PROFILE)
"""The sections, in the order of the printed report."""


def in_report_order(found: Iterable[Figure]) -> list[Figure]:
    """``found`` sorted by section, keeping the given order within a section (a stable sort)."""
    return sorted(found, key=lambda f: SECTIONS.index(f.section))
