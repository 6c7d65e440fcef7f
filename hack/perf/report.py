"""The printed table and the goal check of a benchmark run (the JSON is the same data, unformatted).

Goals (the absolute ones here, the same-run ones in ``perf.goals``) are reported, never asserted: a run
that misses one still succeeds, since the harness exists to show where phalanx stands, not to gate a change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from perf.common import SIDECAR
from perf.envelope import steady_cpu_table

GIB_KIB = 2**20


def num(value: Any, fmt: str = "{:.2f}") -> str:
    """``value`` formatted, or "-" when the run has no such figure (missing, or NaN written as null)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, text_first: bool = False) -> list[str]:
    """Aligned columns: numbers to the right; the first column to the left when it holds prose."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if text_first and i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
    return ["  " + x.rstrip() for x in out]


def _pair(summary: dict[str, Any] | None) -> str:
    if not summary:
        return "-"
    return f"{num(summary.get('p50'))} / {num(summary.get('p99'))}"


def _positive(value: Any) -> float | None:
    """A figure usable as a numerator or denominator: a positive number (NaN is written as null)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return None
    return float(value)


def pods_per_second(size: dict[str, Any], which: str) -> float | None:
    """Backlog pods/s of ``which`` (``THROUGHPUT_SCHEDULERS``) at one size, if measured."""
    return _positive((size.get(which) or {}).get("pods_per_second"))


def paced_p50(size: dict[str, Any], which: str) -> float | None:
    """Paced creation -> bound p50 in ms of ``which`` at one size, if measured."""
    return _positive(((size.get(which) or {}).get("latency_ms") or {}).get("p50"))


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or denominator is None else numerator / denominator


def pods_ratio(size: dict[str, Any], which: str = "phalanx") -> float | None:
    """``which`` / baseline backlog pods/s at one size: the same-run ratio, comparable across machines.

    Both schedulers ran on the same machine minutes apart, so the ratio cancels most of what the two
    shared cores do to the absolute figures; it is what the same-run throughput goals are stated in.
    """
    return _ratio(pods_per_second(size, which), pods_per_second(size, "baseline"))


def p50_ratio(size: dict[str, Any]) -> float | None:
    """Phalanx / baseline paced creation -> bound p50 at one size (lower is better)."""
    return _ratio(paced_p50(size, "phalanx"), paced_p50(size, "baseline"))


THROUGHPUT_SCHEDULERS = ("baseline", "phalanx", SIDECAR)
"""The rows of the throughput table, in this order: each one the run measured."""


def throughput_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per (nodes, scheduler); phalanx's rows carry their ratio to the baseline.

    ``created/s`` is how fast the harness created the backlog through the API server (and, for
    phalanx, its gate webhook) before the scheduler started: work done at creation is outside the
    backlog's pods/s, so it is printed beside it.
    """
    rows = []
    for size in results.get("sizes", []):
        for which in THROUGHPUT_SCHEDULERS:
            r = size.get(which)
            if not r:
                continue
            ratio = num(pods_ratio(size, which), "{:.2f}x") if which != "baseline" else "-"
            latency = r.get("latency_ms") or {}
            rows.append(
                [
                    str(size["nodes"]),
                    which,
                    f"{r.get('burst_bound', 0)}/{r.get('burst_pods', 0)}",
                    num(r.get("burst_created_per_second"), "{:.0f}"),
                    num(r.get("pods_per_second"), "{:.1f}"),
                    ratio,
                    f"{latency.get('n', 0)}@{num(r.get('paced_rate_achieved'), '{:g}')}/s",
                    num(latency.get("p50"), "{:.0f}"),
                    num(latency.get("p99"), "{:.0f}"),
                ]
            )
    return rows


def goals(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(goal, measured, verdict) for each absolute goal that the run has a figure for."""
    out: list[tuple[str, str, str]] = []
    by_nodes = {s["nodes"]: s for s in results.get("sizes", [])}

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("met" if ok else "MISSED")

    s1000 = by_nodes.get(1000, {})
    base, phx = (
        (s1000.get("baseline") or {}).get("pods_per_second"),
        (s1000.get("phalanx") or {}).get("pods_per_second"),
    )
    if base and phx:
        out.append(
            (
                "throughput with extender >= 0.5x without, 1,000 nodes",
                f"{phx / base:.2f}x ({phx:.0f} vs {base:.0f} pods/s)",
                verdict(phx / base >= 0.5),
            )
        )
    phx5 = (by_nodes.get(5000, {}).get("phalanx") or {}).get("pods_per_second")
    out.append(
        (
            "phalanx >= 150 pods/s at 5,000 nodes",
            num(phx5, "{:.0f} pods/s"),
            verdict(None if phx5 is None else phx5 >= 150),
        )
    )
    for nodes, limit in ((1000, 2.0), (5000, 5.0)):
        calls = by_nodes.get(nodes, {}).get("calls") or {}
        p99s = [v["p99"] for v in (calls.get("filter") or {}).values() if isinstance(v, dict)]
        worst = max(p99s) if p99s else None
        out.append(
            (
                f"filter p99 <= {limit:g} ms at {nodes:,} candidates",
                num(worst, "{:.2f} ms"),
                verdict(None if worst is None else worst <= limit),
            )
        )
    gang = [
        g
        for s in results.get("sizes", [])
        for g in s.get("gangs", [])
        if g["size"] == 256 and not g.get("baseline_single_pods") and not g.get("native_gang")
    ]
    if gang:
        g = gang[-1]
        took = g.get("last_created_to_all_bound_seconds")
        out.append(
            (
                f"256-pod gang bound <= 5 s after last member ({g['nodes']:,} nodes)",
                num(took, "{:.2f} s"),
                verdict(took is not None and took <= 5.0),
            )
        )
    else:
        out.append(("256-pod gang bound <= 5 s after last member", "not run", "n/a"))
    envelope = (results.get("memory") or {}).get("envelope") or {}
    if envelope.get("rss_kib"):
        out.append(
            (
                f"extender RSS < 1 GiB, real gunicorn worker ({envelope['nodes']:,} nodes / "
                f"{envelope['pods']:,} pods via API)",
                f"{envelope['rss_kib'] / 1024:.0f} MiB",
                verdict(envelope["rss_kib"] < GIB_KIB),
            )
        )
    mem = (results.get("memory") or {}).get("cache") or {}
    if mem.get("rss_kib"):
        label = f"{mem['nodes']:,} nodes / {mem['pods']:,} pods"
        out.append(
            (
                f"extender cache RSS < 1 GiB ({label}, steady)",
                f"{mem['rss_kib'] / 1024:.0f} MiB",
                verdict(mem["rss_kib"] < GIB_KIB),
            )
        )
        out.append(
            (
                "  same, peak while the list is converted",
                f"{mem['peak_rss_kib'] / 1024:.0f} MiB",
                verdict(mem["peak_rss_kib"] < GIB_KIB),
            )
        )
    return out


def disturbed(results: dict[str, Any]) -> list[str]:
    """Figures taken on a shared machine, each with why.

    An end-to-end test run started after the harness checked, or the machine never settled before the
    measurement started (``perf.common.Settled``).
    """
    out = []
    for size in results.get("sizes", []):
        for which in ("baseline", "phalanx"):
            r = size.get(which) or {}
            for key in ("disturbed", "paced_disturbed"):
                if r.get(key):
                    out.append(
                        f"{which} @ {size['nodes']:,} nodes, {key.replace('_disturbed', '')}: {r[key]}"
                    )
        if (size.get("calls") or {}).get("disturbed"):
            out.append(f"extender calls @ {size['nodes']:,}: {size['calls']['disturbed']}")
        out += [
            f"gang of {g['size']} @ {size['nodes']:,}: {_why(g['disturbed'])}"
            for g in size.get("gangs", [])
            if g.get("disturbed")
        ]
    envelope = (results.get("memory") or {}).get("envelope") or {}
    for stage in (envelope.get("first_stage") or {}, envelope):
        if stage.get("disturbed"):
            out.append(f"envelope @ {stage.get('pods', 0):,} pods: {stage['disturbed']}")
    for section in ("decision", "door"):
        note = (results.get(section) or {}).get("disturbed")
        if note:
            out.append(f"{section} (in-process): {note}")
    return out


def _why(disturbed: object) -> str:
    """A row's disturbed note; older results say only ``true`` (an end-to-end test run)."""
    return disturbed if isinstance(disturbed, str) else "an end-to-end test run was running"


def render(results: dict[str, Any]) -> str:
    """The whole report as printed at the end of a run."""
    v = results["versions"]
    lines = [
        f"phalanx benchmark ({results['mode']}): python {v['python']}, kubernetes {v['kubernetes']}, "
        f"commit {v['git_commit'][:12]}{'+dirty' if v['git_commit'].endswith('+dirty') else ''}, "
        f"{v['cores']} cores, {v['memory_gib']} GiB; load generator shares the cores; "
        f"{results.get('duration_seconds', 0):.0f} s",
        *(
            [f"uncommitted product changes measured too: {', '.join(v['uncommitted_product_changes'])}", ""]
            if v.get("uncommitted_product_changes")
            else [""]
        ),
        "1. Scheduling through kube-scheduler v{} without (baseline), with the extender (phalanx) and as the "
        "framework sidecar (phalanx-sidecar)".format(v["kubernetes"].lstrip("v")),
        "   backlog: pods created first (created/s), then the scheduler started; pods/s between first and "
        "last bind",
        "   latency: pods created one by one at a fixed rate; POST sent -> watch sees spec.nodeName, ms",
    ]
    lines += table(
        ["nodes", "scheduler", "bound", "created/s", "pods/s", "ratio", "paced", "p50 ms", "p99 ms"],
        throughput_rows(results),
    )
    lines += [
        "",
        "2. Extender per call (direct POSTs to gunicorn, NodeNames, topology annotations), p50 / p99 ms",
    ]
    call_rows = []
    envelope = (results.get("memory") or {}).get("envelope") or {}
    cases = [
        (s.get("calls"), s.get("extender_rss_kib", {}).get("VmRSS", 0), "") for s in results.get("sizes", [])
    ]
    first = envelope.get("first_stage") or {}
    if first.get("calls"):
        cases.append((first["calls"], 0, f" +{first['pods']:,} pods"))
    if envelope.get("calls"):
        cases.append((envelope["calls"], envelope.get("rss_kib", 0), f" +{envelope['pods']:,} pods"))
    for calls, rss, extra in cases:
        if calls:
            call_rows.append(
                [
                    f"{calls['candidates']:,}{extra}",
                    str(calls["calls"]),
                    _pair(calls["filter"].get("1")),
                    _pair(calls["filter"].get("4")),
                    _pair(calls["prioritize"].get("1")),
                    _pair(calls["prioritize"].get("4")),
                    f"{rss / 1024:.0f}",
                ]
            )
    lines += table(
        [
            "candidates",
            "calls",
            "filter 1-GPU",
            "filter 4-GPU",
            "prioritize 1-GPU",
            "prioritize 4-GPU",
            "RSS MiB",
        ],
        call_rows,
    )
    headers, rows = steady_cpu_table(envelope)
    if rows:
        lines += ["", "   CPU while those pods sit still (after the settle wait, 10 s), % of one core"]
        lines += table(headers, rows)
    lines += ["", "3. Gang time-to-bound (PodGroup + one-GPU members, one gang at a time)"]
    gang_rows = [
        [
            f"{g['nodes']:,}",
            f"{g['size']} single (baseline)"
            if g.get("baseline_single_pods")
            else (f"{g['size']} native gang" if g.get("native_gang") else str(g["size"])),
            f"{g.get('bound', 0)}/{g['size']}",
            num(g.get("create_seconds")),
            num(g.get("last_created_to_all_bound_seconds")),
        ]
        for s in results.get("sizes", [])
        for g in s.get("gangs", [])
    ]
    lines += table(["nodes", "gang", "bound", "create s", "last created -> all bound s"], gang_rows)
    lines += ["", "4. Fair-share recompute (scheduling.queues, in-process, one call each), seconds"]
    fair = results.get("fair_share") or {}
    if not fair.get("available"):
        lines.append(f"  not available: {fair.get('reason', 'section not run')}")
    else:
        fair_rows = []
        for row in fair["rows"]:
            steps = row.get("steps", {})
            note = row.get("skipped") or row.get("error") or ""
            if "timed_out_after_seconds" in row:
                note = f"> {row['timed_out_after_seconds']:g} s in {row.get('unfinished_step', '?')}"
            fair_rows.append(
                [
                    f"{row['queues']:,}",
                    f"{row['groups']:,}",
                    *(
                        num(steps.get(s), "{:.3f}")
                        for s in ("tree", "fair_shares", "queue_states", "order_pending")
                    ),
                    note or num(row.get("recompute_seconds"), "{:.3f}"),
                ]
            )
        lines += table(
            ["queues", "pending groups", "tree", "fair_shares", "queue_states", "order_pending", "total"],
            fair_rows,
        )
    lines += ["", "4b. Elastic planning round (scheduling.elastic, in-process, one round each)"]
    elastic_rows = [
        [
            f"{r['jobs']:,}",
            f"{r['nodes']:,}",
            f"{r['seconds']:.2f}",
            str(r["resizes"]),
            str(r["moves"]),
            str(r["moves_to_target"]),
        ]
        for r in results.get("elastic") or []
    ]
    lines += table(["jobs", "nodes", "seconds", "resizes", "moves", "moves to target"], elastic_rows)
    lines += ["", "4c. Trace simulator, fixed Philly windows per policy (perf.simreplay, subprocess each)"]
    sim_rows = [
        [str(r.get("window", "busy")), r["policy"], "-", "-", "-", "-", str(r["error"])]
        if "error" in r
        else [
            str(r.get("window", "busy")),
            r["policy"],
            f"{r['jobs']:,}",
            f"{r['nodes']:,}",
            f"{r['events']:,}",
            f"{r['seconds']:.1f}",
            f"{r['events_per_s']:,.0f}",
        ]
        for r in results.get("simulator") or []
    ]
    lines += table(["window", "policy", "jobs", "nodes", "events", "wall s", "events/s"], sim_rows)
    lines += ["", "5. Resident memory of the extender"]
    memory = results.get("memory") or {}
    mem_rows = []
    cache = memory.get("cache") or {}
    if cache.get("rss_kib"):
        mem_rows.append(
            [
                "ClusterCache in a subprocess (API-shaped objects)",
                f"{cache['nodes']:,}",
                f"{cache['pods']:,}",
                f"{cache['rss_kib'] / 1024:.0f}",
                f"{cache['peak_rss_kib'] / 1024:.0f}",
            ]
        )
        mem_rows.append(
            [
                "  same interpreter before loading anything",
                "0",
                "0",
                f"{cache['rss_after_imports_kib'] / 1024:.0f}",
                "-",
            ]
        )
    elif cache.get("error"):
        mem_rows.append([f"ClusterCache subprocess failed: {cache['error']}", "-", "-", "-", "-"])
    for probe in memory.get("gunicorn", []):
        mem_rows.append(
            [
                f"gunicorn extender worker, {probe['when']}",
                f"{probe['nodes']:,}",
                f"{probe['pods']:,}",
                f"{probe['rss_kib'] / 1024:.0f}",
                f"{probe['peak_rss_kib'] / 1024:.0f}",
            ]
        )
    lines += table(["what", "nodes", "pods", "RSS MiB", "peak MiB"], mem_rows, text_first=True)
    if memory.get("api_estimate"):
        lines.append(f"  {memory['api_estimate']}")
    lines += ["", "Goals (issue 6)"]
    lines += table(["goal", "measured", "verdict"], [list(g) for g in goals(results)], text_first=True)
    notes: list[str] = list(results.get("notes", [])) + disturbed(results)
    if notes:
        lines += ["", "Notes"] + [f"  - {n}" for n in notes]
    return "\n".join(lines)


def section_header(progress: Callable[[str], None], title: str) -> None:
    """A visible separator in the progress output between sections."""
    progress(f"== {title}")
