"""The scaling plot written beside a run's JSON: two panels, a line per scheduler, same-run ratios."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.text import Annotation
from perf.plot import NODES_LABEL, P50_LABEL, PODS_LABEL, scaling_figure, write_plot


def _x(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_xdata())]


def _y(line: Line2D) -> list[float]:
    return [float(v) for v in np.asarray(line.get_ydata())]


def test_the_plot_is_a_png_with_pods_per_second_and_p50_against_nodes(
    tmp_path: Path, new_run: dict[str, Any]
) -> None:
    path = tmp_path / "bench.png"
    fig = write_plot(new_run, path)
    assert fig is not None
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    pods, p50 = fig.axes
    assert [ax.get_xlabel() for ax in (pods, p50)] == [NODES_LABEL, NODES_LABEL]
    assert (pods.get_ylabel(), p50.get_ylabel()) == (PODS_LABEL, P50_LABEL)
    assert pods.get_xscale() == "log"


def test_each_scheduler_has_a_line_over_the_node_counts(new_run: dict[str, Any]) -> None:
    fig = scaling_figure(new_run)
    assert fig is not None
    pods, p50 = fig.axes
    lines = {line.get_label(): (_x(line), _y(line)) for line in pods.get_lines()}
    assert lines == {
        "kube-scheduler (baseline)": ([100, 1000, 5000], [160.0, 500.0, 300.0]),
        "kube-scheduler + phalanx extender": ([100, 1000, 5000], [150.0, 450.0, 210.0]),
    }
    legend = pods.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == list(lines)
    assert [_y(line) for line in p50.get_lines()] == [[40.0, 44.0, 60.0], [50.0, 70.0, 110.0]]


def test_the_same_run_ratio_is_written_at_each_phalanx_point(new_run: dict[str, Any]) -> None:
    fig = scaling_figure(new_run)
    assert fig is not None
    pods, p50 = fig.axes
    assert len(pods.texts) == 3
    assert [(t.get_text(), t.xy) for t in pods.texts if isinstance(t, Annotation)] == [
        ("0.94x", (100, 150.0)),
        ("0.90x", (1000, 450.0)),
        ("0.70x", (5000, 210.0)),
    ]
    assert [t.get_text() for t in p50.texts] == ["1.25x", "1.59x", "1.83x"]


def test_a_run_without_throughput_writes_no_plot(tmp_path: Path, new_run: dict[str, Any]) -> None:
    for size in new_run["sizes"]:
        del size["baseline"], size["phalanx"]
    path = tmp_path / "bench.png"
    assert write_plot(new_run, path) is None
    assert not path.exists()


def test_a_run_with_one_scheduler_plots_it_without_ratios(new_run: dict[str, Any]) -> None:
    for size in new_run["sizes"]:
        del size["baseline"]
    fig = scaling_figure(new_run)
    assert fig is not None
    assert [line.get_label() for line in fig.axes[0].get_lines()] == ["kube-scheduler + phalanx extender"]
    assert not fig.axes[0].texts
