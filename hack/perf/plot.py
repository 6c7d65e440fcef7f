"""The scaling plot of a run: pods/s and paced p50 against node count, baseline and phalanx.

The same-run goals are ratios to the baseline kube-scheduler at each size, and whether the ratio holds as
the cluster grows is the question a table of three sizes answers poorly. So the run writes, beside its
JSON, one PNG with two panels (backlog pods/s; paced creation -> bound p50), a line per scheduler over
the node counts, and the same-run phalanx / baseline ratio written at each phalanx point.

Figures come from ``perf.report`` (the same ones the table prints). matplotlib is used through
``matplotlib.figure.Figure`` alone, never ``pyplot``: no global state, no display, no backend choice.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from perf.report import p50_ratio, paced_p50, pods_per_second, pods_ratio

SCHEDULERS = {
    "baseline": ("kube-scheduler (baseline)", "tab:gray", "o"),
    "phalanx": ("kube-scheduler + phalanx extender", "tab:blue", "s"),
}
"""Per scheduler: legend label, colour, marker."""

NODES_LABEL = "simulated 8-GPU nodes"
PODS_LABEL = "backlog throughput, pods/s"
P50_LABEL = "paced creation -> bound p50, ms"

Metric = Callable[[dict[str, Any], str], float | None]
Ratio = Callable[[dict[str, Any]], float | None]


def _panel(ax: Axes, sizes: list[dict[str, Any]], metric: Metric, ratio: Ratio, ylabel: str) -> None:
    """One panel: a line per scheduler over the sizes it has the figure for, ratios at phalanx's points."""
    for which, (label, colour, marker) in SCHEDULERS.items():
        points = [(s["nodes"], v) for s in sizes if (v := metric(s, which)) is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker=marker, color=colour, label=label)
    for size in sizes:
        r, y, base = ratio(size), metric(size, "phalanx"), metric(size, "baseline")
        if r is not None and y is not None:
            below = base is not None and y < base  # written on the side away from the baseline's line
            ax.annotate(
                f"{r:.2f}x",
                (size["nodes"], y),
                textcoords="offset points",
                xytext=(0, -10 if below else 8),
                ha="center",
                va="top" if below else "bottom",
            )
    nodes = [s["nodes"] for s in sizes]
    ax.set_xscale("log")
    ax.set_xticks(nodes, [f"{n:,}" for n in nodes])
    ax.minorticks_off()
    ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)  # room for the ratio above the highest point
    ax.set_xlabel(NODES_LABEL)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if ax.get_lines():
        ax.legend(loc="best", fontsize="small")
    else:
        ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center")


def scaling_figure(results: dict[str, Any]) -> Figure | None:
    """The two panels for ``results``, or None when it has no throughput figure to plot."""
    sizes = [
        s
        for s in results.get("sizes") or []
        if isinstance(s, dict)
        and isinstance(s.get("nodes"), int)
        and any(m(s, w) is not None for m in (pods_per_second, paced_p50) for w in SCHEDULERS)
    ]
    if not sizes:
        return None
    fig = Figure(figsize=(11, 4.5), layout="constrained")
    _panel(fig.add_subplot(1, 2, 1), sizes, pods_per_second, pods_ratio, PODS_LABEL)
    _panel(fig.add_subplot(1, 2, 2), sizes, paced_p50, p50_ratio, P50_LABEL)
    v = results.get("versions") or {}
    fig.suptitle(
        f"phalanx benchmark ({results.get('mode', '?')}), commit {str(v.get('git_commit', '?'))[:12]}, "
        f"{v.get('cores', '?')} cores; labels: phalanx / baseline, same run"
    )
    return fig


def write_plot(results: dict[str, Any], path: Path) -> Figure | None:
    """Write the scaling plot of ``results`` to ``path`` (PNG); return it (None: nothing to plot)."""
    fig = scaling_figure(results)
    if fig is not None:
        fig.savefig(path, format="png", dpi=110)
    return fig
