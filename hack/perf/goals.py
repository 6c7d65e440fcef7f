"""The same-run goals, checked against one run's JSON: what ``--compare`` and the printed report mark.

They restate the absolute goals (``perf.report``) relative to the baseline kube-scheduler of the same run,
because absolute figures on two shared cores move with whatever else the machine does, while a same-run
ratio mostly does not. Like every goal of the harness they are reported, never asserted.

Each goal reads figures the report already derives (``perf.report``); a run without the figure (a
``--quick`` run has no 5,000-node size, a ``--sections`` subset skips others) gets "n/a", not a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from perf.report import GIB_KIB, num, p50_ratio, paced_p50, pods_per_second, pods_ratio, table

MIN_PODS_RATIO = 0.8
"""Throughput with the extender at least this share of the baseline's (1,000 and 5,000 nodes)."""

MAX_P50_RATIO = 2.0
"""Paced creation -> bound p50 with the extender at most this multiple of the baseline's (5,000 nodes)."""

CALL_P99_MS = {1000: 2.0, 5000: 5.0}
"""Worst filter or prioritize p99 over HTTP, in ms, per candidate count."""

GANG_NODES, GANG_SIZE, MAX_GANG_RATIO = 5000, 256, 1.3
MAX_STEADY_RATIO = 1.2
"""A gang of 256 at 5,000 nodes bound within 1.3x the baseline's time for 256 single pods."""

ENVELOPE = (5000, 150_000)
"""(nodes, pods) at which the real extender worker's RSS must stay under 1 GiB."""


@dataclass(frozen=True, slots=True)
class Goal:
    """One goal as one run met it.

    Attributes:
        label: the goal, worded the same for every run so two runs' goals line up.
        measured: the figure(s) it was judged on, or why there is none.
        ok: True met, False missed, None not judged (the run lacks the figure).
    """

    label: str
    measured: str
    ok: bool | None

    @property
    def verdict(self) -> str:
        """The verdict: "met", "MISSED" (capitals, so a miss stands out in a column) or "n/a"."""
        return "n/a" if self.ok is None else ("met" if self.ok else "MISSED")


def _size(results: dict[str, Any], nodes: int) -> dict[str, Any]:
    for size in results.get("sizes") or []:
        if isinstance(size, dict) and size.get("nodes") == nodes:
            return size
    return {}


def _throughput(results: dict[str, Any], nodes: int) -> Goal:
    size = _size(results, nodes)
    label = f"throughput with extender >= {MIN_PODS_RATIO:g}x baseline, {nodes:,} nodes"
    ratio = pods_ratio(size)
    if ratio is None:
        return Goal(label, "not measured", None)
    measured = (
        f"{ratio:.2f}x ({num(pods_per_second(size, 'phalanx'), '{:.0f}')} vs "
        f"{num(pods_per_second(size, 'baseline'), '{:.0f}')} pods/s)"
    )
    return Goal(label, measured, ratio >= MIN_PODS_RATIO)


def _latency(results: dict[str, Any], nodes: int, limit: float = MAX_P50_RATIO) -> Goal:
    size = _size(results, nodes)
    label = f"paced p50 with extender <= {limit:g}x baseline, {nodes:,} nodes"
    ratio = p50_ratio(size)
    if ratio is None:
        return Goal(label, "not measured", None)
    measured = (
        f"{ratio:.2f}x ({num(paced_p50(size, 'phalanx'), '{:.0f}')} vs "
        f"{num(paced_p50(size, 'baseline'), '{:.0f}')} ms)"
    )
    return Goal(label, measured, ratio <= limit)


def _calls(results: dict[str, Any], nodes: int, limit: float) -> Goal:
    """The worst p99 of filter and prioritize over both pod shapes, timed while the backlog was bound."""
    label = f"filter and prioritize p99 over HTTP <= {limit:g} ms, {nodes:,} candidates"
    calls = _size(results, nodes).get("calls") or {}
    worst: dict[str, float] = {}
    for verb in ("filter", "prioritize"):
        p99s = [
            s["p99"]
            for s in (calls.get(verb) or {}).values()
            if isinstance(s, dict) and isinstance(s.get("p99"), int | float)
        ]
        if p99s:
            worst[verb] = max(p99s)
    if len(worst) < 2:
        return Goal(label, "not measured", None)
    measured = f"filter {worst['filter']:.2f}, prioritize {worst['prioritize']:.2f} ms"
    return Goal(label, measured, max(worst.values()) <= limit)


def _gang(results: dict[str, Any], limit: float = MAX_GANG_RATIO) -> Goal:
    """The gang's time against the baseline's for as many single pods, created and timed the same way."""
    label = f"{GANG_SIZE}-pod gang <= {limit:g}x baseline's single pods, {GANG_NODES:,} nodes"
    size = _size(results, GANG_NODES)
    rows = [g for g in size.get("gangs") or [] if isinstance(g, dict) and g.get("size") == GANG_SIZE]
    gangs = [g for g in rows if not g.get("baseline_single_pods") and not g.get("native_gang")]
    singles = [g for g in rows if g.get("baseline_single_pods")]
    if not gangs:
        return Goal(label, "not measured", None)
    took = gangs[-1].get("last_created_to_all_bound_seconds")
    if not isinstance(took, int | float):
        return Goal(label, f"{gangs[-1].get('bound', '?')}/{GANG_SIZE} members bound", False)
    base = singles[-1].get("last_created_to_all_bound_seconds") if singles else None
    if not isinstance(base, int | float) or base <= 0:
        return Goal(label, f"gang {took:.2f} s; baseline for single pods not measured", None)
    ratio = took / base
    return Goal(label, f"gang {took:.2f} s, baseline {base:.2f} s: {ratio:.2f}x", ratio <= limit)


def _rss(results: dict[str, Any]) -> Goal:
    """The real gunicorn worker's RSS once the API held the envelope's pods (``memory.envelope``)."""
    nodes, pods = ENVELOPE
    label = f"extender RSS < 1 GiB, {nodes:,} nodes / {pods:,} pods"
    envelope = (results.get("memory") or {}).get("envelope") or {}
    rss = envelope.get("rss_kib")
    if not isinstance(rss, int | float) or not rss:
        return Goal(label, "not measured", None)
    measured = f"{rss / 1024:.0f} MiB"
    if envelope.get("nodes", 0) < nodes or envelope.get("pods", 0) < pods:
        at = f"{envelope.get('nodes', 0):,} nodes / {envelope.get('pods', 0):,} pods"
        return Goal(label, f"{measured} at {at} only", None)
    return Goal(label, measured, rss < GIB_KIB)


def _steady(results: dict[str, Any]) -> Goal:
    """Per-call p50 with the envelope's pods against a tenth of them (``memory.envelope.first_stage``).

    "Independent of the number of pods" is judged with room for noise: the slower verb's p50 at the
    full count within 1.2x its p50 at a tenth (two batches of the same calls differ by about 10%).
    """
    label = f"per-call p50 at {ENVELOPE[1]:,} pods <= {MAX_STEADY_RATIO:g}x at a tenth of them"
    envelope = (results.get("memory") or {}).get("envelope") or {}
    first = envelope.get("first_stage") or {}
    full_calls, tenth_calls = envelope.get("calls") or {}, first.get("calls") or {}
    ratios = {}
    for verb in ("filter", "prioritize"):
        full, tenth = (
            (full_calls.get(verb) or {}).get("1") or {},
            (tenth_calls.get(verb) or {}).get("1") or {},
        )
        if (
            isinstance(full.get("p50"), int | float)
            and isinstance(tenth.get("p50"), int | float)
            and tenth["p50"]
        ):
            ratios[verb] = (tenth["p50"], full["p50"])
    if len(ratios) < 2:
        return Goal(label, "not measured", None)
    measured = ", ".join(
        f"{verb} {a:.2f} -> {b:.2f} ms ({first.get('pods', 0):,} -> {envelope.get('pods', 0):,} pods)"
        for verb, (a, b) in ratios.items()
    )
    worst = max(b / a for a, b in ratios.values())
    if envelope.get("pods", 0) < ENVELOPE[1]:
        return Goal(label, f"{measured} only", None)
    return Goal(label, measured, worst <= MAX_STEADY_RATIO)


def issue13(results: dict[str, Any]) -> list[Goal]:
    """Every same-run goal, in a fixed order, judged on one run (n/a where it has no figure)."""
    return [
        _throughput(results, 1000),
        _throughput(results, 5000),
        _latency(results, 5000),
        *(_calls(results, nodes, limit) for nodes, limit in CALL_P99_MS.items()),
        _gang(results),
        _rss(results),
        _steady(results),
    ]


def render_goals(results: dict[str, Any]) -> str:
    """The same-run goals for one run, as printed after the report (which keeps the absolute ones)."""
    rows = [[g.label, g.measured, g.verdict] for g in issue13(results)]
    return "\n".join(
        [
            "Goals (issue 13: relative to the baseline measured in the same run)",
            *table(["goal", "measured", "verdict"], rows, text_first=True),
        ]
    )
