"""PNG plots of a comparison: JCT CDF per policy, GPUs allocated over time, each queue against its share.

matplotlib with the Agg backend (no display needed); file names are fixed so that a rerun overwrites
its own plots: ``<prefix>-jct-cdf.png``, ``<prefix>-allocation.png`` and, when the runs had queues,
``<prefix>-queues-<policy>.png`` (GPUs held per queue, dashed: its fair share at that moment).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from scheduling.model import Resources
from scheduling.queues import Queue, QueueTree, fair_shares
from simulator.results import RunResult


def write_plots(
    results: Sequence[RunResult], directory: Path, prefix: str, queues: Sequence[Queue] = ()
) -> list[Path]:
    """Write the plots of ``results`` into ``directory`` (created if missing); return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [_jct_cdf(results, directory / f"{prefix}-jct-cdf.png", prefix)]
    paths.append(_allocation(results, directory / f"{prefix}-allocation.png", prefix))
    if queues:
        paths += [
            _queues(result, directory / f"{prefix}-queues-{result.policy}.png", queues) for result in results
        ]
    return paths


def _jct_cdf(results: Sequence[RunResult], path: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5))
    for result in results:
        jcts = np.sort([job.jct for job in result.jobs]) / 3600
        if len(jcts):
            ax.step(jcts, np.arange(1, len(jcts) + 1) / len(jcts), where="post", label=result.policy)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("share of jobs")
    ax.set_title(f"{title}: JCT CDF")
    return _save(fig, ax, path)


def _allocation(results: Sequence[RunResult], path: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(9, 5))
    capacity = max((r.capacity for r in results), default=0)
    for result in results:
        times = [r.now / 3600 for r in result.timeline]
        ax.plot(times, [r.allocated for r in result.timeline], label=result.policy, linewidth=0.9)
    if capacity:
        ax.axhline(capacity, color="black", linestyle=":", linewidth=0.8, label="cluster")
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("GPUs allocated")
    ax.set_title(f"{title}: GPUs allocated over time")
    return _save(fig, ax, path)


def _queues(result: RunResult, path: Path, queues: Sequence[Queue]) -> Path:
    tree = QueueTree.build(queues)
    names = sorted({q for r in result.timeline for q in r.demand})
    fig, ax = plt.subplots(figsize=(10, 6))
    times = [r.now / 3600 for r in result.timeline]
    colors = plt.get_cmap("tab20")
    shares = [
        fair_shares(
            tree, Resources(gpus=result.capacity), {q: Resources(gpus=g) for q, g in r.demand.items()}
        )
        for r in result.timeline
    ]
    for i, name in enumerate(names):
        held = [r.held.get(name, 0) for r in result.timeline]
        share = [s[name].fair_share.gpus for s in shares]
        ax.plot(times, held, color=colors(i % 20), linewidth=0.9, label=name)
        ax.plot(times, share, color=colors(i % 20), linewidth=0.7, linestyle="--")
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("GPUs (solid: held, dashed: fair share)")
    ax.set_title(f"{result.policy}: GPUs per queue against its fair share")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _save(fig: Figure, ax: Axes, path: Path) -> Path:
    """Grid, legend, tight layout, write the PNG, and free the figure (many runs draw many)."""
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
