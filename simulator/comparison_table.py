"""The comparison table on stdout: one row per policy, the published figures beside it, the goals.

The goals (``goals``: JCT and queueing delay against FIFO, no partial gang, compact and NVLink-connected
placements, GPUs busy while jobs wait, Jain's index) are reported here as met or MISSED and never asserted
in a test: a simulator's figures are findings, not invariants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from simulator.run_figures import Figures

COLUMNS = (
    ("policy", 20),
    ("jobs", 5),
    ("avg JCT", 9),
    ("p50 JCT", 9),
    ("p99 JCT", 9),
    ("avg wait", 9),
    ("p99 wait", 9),
    ("makespan", 9),
    ("alloc|wait", 10),
    ("partial", 7),
    ("resizes", 7),
    ("moves", 6),
    ("preempt", 7),
    ("compact", 7),
    ("NVLink", 6),
    ("Jain", 5),
)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _row(f: Figures) -> tuple[str, ...]:
    jobs = f"{f.jobs}" if not f.unfinished else f"{f.jobs}+{f.unfinished}"
    return (
        f.policy,
        jobs,
        _seconds(f.avg_jct_s),
        _seconds(f.p50_jct_s),
        _seconds(f.p99_jct_s),
        _seconds(f.avg_queueing_s),
        _seconds(f.p99_queueing_s),
        _seconds(f.makespan_s),
        _share(f.allocation_while_waiting),
        str(f.partial_gangs),
        str(f.resizes),
        str(f.moves),
        str(f.preemptions),
        _share(f.compact_share),
        _share(f.nvlink_share),
        "-" if f.jain_index is None else f"{f.jain_index:.2f}",
    )


def render(rows: Sequence[Figures]) -> str:
    """The table (seconds; ``jobs`` is completed, ``+n`` not completed when the run stopped)."""
    lines = [
        "  ".join(name.rjust(width) if i else name.ljust(width) for i, (name, width) in enumerate(COLUMNS))
    ]
    for figures in rows:
        cells = _row(figures)
        lines.append(
            "  ".join(
                cell.rjust(width) if i else cell.ljust(width)
                for i, (cell, (_, width)) in enumerate(zip(cells, COLUMNS, strict=True))
            )
        )
    return "\n".join(lines)


def published_line(published: Mapping[str, float], load: float) -> str:
    """The Pollux artifact's average JCTs for the same workload and load."""
    if not published:
        return "published (Pollux OSDI'21 artifact): no figures for this workload"
    parts = ", ".join(f"{policy} {value:,.1f} s" for policy, value in sorted(published.items()))
    return f"published avg JCT (Pollux OSDI'21 artifact, load {load:.1f}): {parts}"


def _goal(met: bool | None, text: str) -> str:
    state = "n/a   " if met is None else "met   " if met else "MISSED"
    return f"  [{state}] {text}"


def goals(rows: Sequence[Figures], *, subject: str = "phalanx", baseline: str = "fifo") -> list[str]:
    """The goals for ``subject`` against ``baseline``, each met / MISSED / n/a with the figures."""
    by = {f.policy: f for f in rows}
    ours, base = by.get(subject), by.get(baseline)
    if ours is None:
        return []
    lines = [f"goals for {subject}:"]
    if base is not None and ours.avg_jct_s is not None and base.avg_jct_s:
        ratio = ours.avg_jct_s / base.avg_jct_s
        lines.append(_goal(ratio <= 0.5, f"avg JCT <= 0.5x {baseline}: {ratio:.2f}x"))
    if base is not None and ours.p99_queueing_s is not None and base.p99_queueing_s:
        ratio = ours.p99_queueing_s / base.p99_queueing_s
        lines.append(_goal(ratio <= 0.5, f"p99 queueing delay <= 0.5x {baseline}: {ratio:.2f}x"))
    lines.append(_goal(ours.partial_gangs == 0, f"0 partial gangs: {ours.partial_gangs}"))
    compact = ours.compact_share
    lines.append(
        _goal(
            None if compact is None else compact >= 0.95,
            f">= 95% of multi-GPU jobs on the best-connected set (fewest nodes): {_share(compact)}",
        )
    )
    nvlink = ours.nvlink_share
    lines.append(
        _goal(
            None if nvlink is None else nvlink >= 0.95,
            ">= 95% of multi-GPU jobs on fully NVLink-connected sets where such a set exists: "
            + f"{_share(nvlink)} of {ours.nvlink_jobs}",
        )
    )
    alloc = ours.allocation_while_waiting
    lines.append(
        _goal(
            None if alloc is None else alloc >= 0.9, f"GPU allocation >= 90% while jobs wait: {_share(alloc)}"
        )
    )
    jain = ours.jain_index
    lines.append(
        _goal(
            None if jain is None else jain >= 0.95,
            "Jain's index >= 0.95 while demand exceeds supply: " + ("-" if jain is None else f"{jain:.3f}"),
        )
    )
    return lines
