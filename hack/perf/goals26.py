"""Issue 26's goals (a decisive extender), judged on one run, and the interleaved section's table.

The throughput goals read the interleaved section (``perf.interleave``): the median of each scheduler's
ratios to the baseline runs around it, printed with their spread and the floors (null extenders) of the
same run beside them. The rest read the figures issue 13's goals read (``perf.goals``), with issue 26's
limits. Reported, never asserted; "n/a" where the run lacks the figure, with what is missing.
"""

from __future__ import annotations

from typing import Any

from perf.common import SIDECAR
from perf.goals import Goal, _gang, _latency, _rss, _size, _steady
from perf.report import num, paced_p50, table

MIN_RATIO = {1000: 0.9, 5000: 1.0}
"""Throughput against the baseline, in the best mode, per node count."""

MAX_P50_RATIO = 1.5
CALL_P99_MS = {1000: 2.0, 5000: 4.0}
MAX_GANG_RATIO = 1.2
MODES = ("phalanx", "phalanx-ranked", SIDECAR)
"""phalanx's modes: as shipped (decisive filter), ``PHALANX_DECISIVE=false``, and the framework sidecar."""
SAME_STACK_FLOOR = "null-front"
"""The null extender in the stack phalanx's hot verbs run in (``extender.hot``)."""


def _medians(results: dict[str, Any], nodes: int) -> dict[str, dict[str, Any]]:
    """The interleaved ratios of each scheduler, creation included when the run recorded it."""
    section = _size(results, nodes).get("interleaved") or {}
    ratios: dict[str, dict[str, Any]] = section.get("whole_ratios") or section.get("ratios") or {}
    return ratios


def _shown(name: str, r: dict[str, Any]) -> str:
    return f"{name} {r['median']:.2f}x ({r['low']:.2f}-{r['high']:.2f})"


def _throughput(results: dict[str, Any], nodes: int) -> Goal:
    limit = MIN_RATIO[nodes]
    label = f"throughput >= {limit:g}x baseline in the best mode, {nodes:,} nodes"
    label += " (interleaved median, with creation)"
    ratios = _medians(results, nodes)
    modes = {m: ratios[m] for m in MODES if m in ratios}
    if not modes:
        return Goal(label, "not measured", None)
    best = max(modes, key=lambda m: modes[m]["median"])
    floors = ", ".join(_shown(n, r) for n, r in sorted(ratios.items()) if n.startswith("null-"))
    measured = ", ".join(_shown(m, r) for m, r in modes.items()) + (f"; floors: {floors}" if floors else "")
    return Goal(label, measured, modes[best]["median"] >= limit)


def _over_floor(results: dict[str, Any], nodes: int) -> Goal:
    label = f"extender mode >= the null extender ({SAME_STACK_FLOOR}) in the same run, {nodes:,} nodes"
    ratios = _medians(results, nodes)
    if "phalanx" not in ratios or SAME_STACK_FLOOR not in ratios:
        return Goal(label, "not measured", None)
    ours, floor = ratios["phalanx"], ratios[SAME_STACK_FLOOR]
    return Goal(
        label,
        f"{_shown('phalanx', ours)} vs {_shown(SAME_STACK_FLOOR, floor)}",
        ours["median"] >= floor["median"],
    )


def _filter_p99(results: dict[str, Any], nodes: int, limit: float) -> Goal:
    label = f"filter p99 over HTTP <= {limit:g} ms, {nodes:,} candidates"
    calls = (_size(results, nodes).get("calls") or {}).get("filter") or {}
    p99s = [s["p99"] for s in calls.values() if isinstance(s, dict) and isinstance(s.get("p99"), int | float)]
    if not p99s:
        return Goal(label, "not measured", None)
    return Goal(label, f"{max(p99s):.2f} ms (worst pod shape)", max(p99s) <= limit)


def _native_gang(results: dict[str, Any]) -> Goal:
    label = "256-pod gang faster than kube-scheduler's native GangScheduling, 5,000 nodes"
    rows = [
        g for g in _size(results, 5000).get("gangs") or [] if isinstance(g, dict) and g.get("size") == 256
    ]
    natives = [g for g in rows if g.get("native_gang")]
    ours = [g for g in rows if not g.get("native_gang") and not g.get("baseline_single_pods")]
    if not natives:
        return Goal(label, "not measured", None)
    native = natives[-1].get("last_created_to_all_bound_seconds")
    if not isinstance(native, int | float):
        why = natives[-1].get("error") or f"{natives[-1].get('bound', '?')}/256 bound"
        return Goal(label, f"native: {why}", None)
    took = ours[-1].get("last_created_to_all_bound_seconds") if ours else None
    if not isinstance(took, int | float):
        return Goal(label, f"native {native:.2f} s; phalanx's gang not measured", None)
    return Goal(label, f"phalanx {took:.2f} s, native {native:.2f} s", took < native)


def _decision(results: dict[str, Any]) -> Goal:
    from perf.decision import GOAL_P99_MS

    label = f"filter decision in-process p99 <= {GOAL_P99_MS:g} ms, 1-GPU pod, 5,000 nodes / 150,000 pods"
    report = results.get("decision") or {}
    decisive = report.get("decisive") or {}
    if not isinstance(decisive.get("p99_ms"), int | float):
        return Goal(label, report.get("error", "not measured"), None)
    ranked = report.get("ranked") or {}
    ranking = ranked.get("prioritize") or {}
    measured = (
        f"decisive p50 {decisive['p50_ms']:.2f} / p99 {decisive['p99_ms']:.2f} ms; ranked: filter "
        f"{num(ranked.get('p50_ms'))} / {num(ranked.get('p99_ms'))} ms + prioritize "
        f"{num(ranking.get('p50_ms'))} / {num(ranking.get('p99_ms'))} ms"
    )
    if report.get("nodes", 0) < 5000 or report.get("pods", 0) < 150_000:
        return Goal(
            label, f"{measured} at {report.get('nodes')} nodes / {report.get('pods')} pods only", None
        )
    return Goal(label, measured, decisive["p99_ms"] <= GOAL_P99_MS)


def _best_latency(results: dict[str, Any], nodes: int) -> Goal:
    """Paced p50 in the best mode measured: as shipped or as the framework sidecar."""
    size = _size(results, nodes)
    label = f"paced p50 <= {MAX_P50_RATIO:g}x baseline in the best mode, {nodes:,} nodes"
    base = paced_p50(size, "baseline")
    modes = {m: p for m in ("phalanx", SIDECAR) if (p := paced_p50(size, m)) is not None}
    if base is None or not modes:
        return Goal(label, "not measured", None)
    best = min(modes, key=lambda m: modes[m])
    measured = ", ".join(f"{m} {p / base:.2f}x ({p:.0f} ms)" for m, p in modes.items())
    return Goal(label, f"{measured}; baseline {base:.0f} ms", modes[best] / base <= MAX_P50_RATIO)


def issue26(results: dict[str, Any]) -> list[Goal]:
    """Every goal of issue 26, in the issue's order (issue 13's judges with issue 26's limits).

    ``filter`` alone is judged for latency: a decided pod is never prioritized.
    """
    return [
        _throughput(results, 5000),
        _throughput(results, 1000),
        _over_floor(results, 5000),
        _over_floor(results, 1000),
        _latency(results, 5000, MAX_P50_RATIO),
        _best_latency(results, 5000),
        *(_filter_p99(results, n, limit) for n, limit in CALL_P99_MS.items()),
        _decision(results),
        _gang(results, MAX_GANG_RATIO),
        _native_gang(results),
        _rss(results),
        _steady(results),
    ]


def render_goals26(results: dict[str, Any]) -> str:
    """Issue 26's goals for one run."""
    rows = [[g.label, g.measured, g.verdict] for g in issue26(results)]
    return "\n".join(
        [
            "Goals (issue 26: a decisive extender; same-run ratios)",
            *table(["goal", "measured", "verdict"], rows, text_first=True),
        ]
    )


def render_interleaved(results: dict[str, Any]) -> list[str]:
    """The interleaved section: pods/s of every run, and each scheduler's ratios with their spread."""
    lines: list[str] = []
    for size in results.get("sizes") or []:
        section = size.get("interleaved")
        if not section:
            continue
        spread = section.get("baseline_spread") or {}
        lines += [
            "",
            f"Throughput, interleaved: {size['nodes']:,} nodes, {section['pods']} pods a backlog, "
            f"{section['repeats']} rounds (baseline runs {num(spread.get('low'), '{:.1f}')}-"
            f"{num(spread.get('high'), '{:.1f}')} pods/s)",
        ]
        rows = []
        whole = section.get("whole") or {}
        for name, rates in (section.get("runs") or {}).items():
            ratio = (section.get("ratios") or {}).get(name) or {}
            with_creation = (section.get("whole_ratios") or {}).get(name) or {}
            rows.append(
                [
                    name,
                    " ".join(num(r, "{:.1f}") for r in rates),
                    num(ratio.get("median")),
                    f"{num(ratio.get('low'))}-{num(ratio.get('high'))}" if ratio else "-",
                    " ".join(num(r, "{:.1f}") for r in whole.get(name) or []) or "-",
                    num(with_creation.get("median")),
                    f"{num(with_creation.get('low'))}-{num(with_creation.get('high'))}"
                    if with_creation
                    else "-",
                ]
            )
        header = ["scheduler", "pods/s per run", "median ratio", "spread"]
        header += ["with creation: pods/s", "median", "spread"]
        lines += table(header, rows, text_first=True)
        lines.append(
            "  (first bind to last; with creation: the creation's seconds and the start to the last bind)"
        )
        for note in section.get("disturbed") or []:
            lines.append(f"  disturbed: {note}")
    return lines
