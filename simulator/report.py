"""A run's figures next to the published ones, as a wire type (msgspec) and as text.

The published figures are the Pollux artifact's average JCTs per policy, relative job load and workload
(``shared/traces/pollux_workloads/published_avg_jct_osdi21_simulator.csv``, derived from the artifact's
``results-jobload/*/summary.json``).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path

import msgspec

from simulator.loop import Mode
from simulator.results import RunResult
from simulator.traces import WorkloadError

PUBLISHED_FILE = "published_avg_jct_osdi21_simulator.csv"


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """What ``python -m simulator run --json`` writes."""

    workload: str
    policy: str
    mode: str
    seed: int
    jobs: int
    steps: int
    avg_jct_s: float
    p50_jct_s: float
    p99_jct_s: float
    published_avg_jct_s: float | None
    ratio_to_published: float | None
    jct_s: dict[str, int]


def read_published(path: Path) -> Mapping[tuple[str, float, str], float]:
    """Published average JCTs keyed by (policy, relative job load, workload name).

    Raises:
        WorkloadError: a missing column, a figure that is no number, or a file that is not CSV text.
    """
    out: dict[tuple[str, float, str], float] = {}
    line = 1
    try:
        with path.open(newline="", encoding="utf-8") as stream:
            reader = csv.DictReader(stream)
            for row in reader:
                line = reader.line_num
                key = (row["policy"], float(row["relative_job_load"]), row["workload"])
                out[key] = float(row["avg_jct_s"])
    except KeyError as exc:
        raise WorkloadError(path, line, str(exc.args[0]), "column missing from the header") from None
    except (TypeError, ValueError) as exc:  # a short row gives None, a bad figure a ValueError
        raise WorkloadError(path, line, "avg_jct_s", f"not a published figure: {exc}") from None
    except csv.Error as exc:
        raise WorkloadError(path, line, "policy", f"not a CSV file: {exc}") from None
    return out


def build(workload: str, result: RunResult, published: float | None) -> Report:
    """The report of one run; the ratio is ours over the published figure."""
    average = result.average_jct
    return Report(
        workload=workload,
        policy=result.policy,
        mode=result.mode,
        seed=result.seed,
        jobs=len(result.jobs),
        steps=result.steps,
        avg_jct_s=average,
        p50_jct_s=result.percentile_jct(50),
        p99_jct_s=result.percentile_jct(99),
        published_avg_jct_s=published,
        ratio_to_published=None if published is None else average / published,
        jct_s={job.name: job.jct for job in result.jobs},
    )


def text(report: Report, mode: Mode, load: float) -> str:
    """Three lines for a terminal."""
    lines = [
        f"{report.workload}: policy {report.policy}, mode {report.mode} ({mode.nodes} nodes x "
        f"{mode.gpus_per_node} GPUs, {mode.step_seconds} s steps, {mode.restart_penalty_seconds} s per "
        f"allocation change), seed {report.seed}",
        f"  {report.jobs} jobs   avg JCT {report.avg_jct_s:,.1f} s   p50 {report.p50_jct_s:,.1f} s   "
        f"p99 {report.p99_jct_s:,.1f} s",
    ]
    if report.published_avg_jct_s is None or report.ratio_to_published is None:
        lines.append(f"  no published figure for {report.policy} at load {load:.1f} on {report.workload}")
    else:
        lines.append(
            f"  published (Pollux OSDI'21 artifact, {report.policy}, load {load:.1f}): avg JCT "
            f"{report.published_avg_jct_s:,.1f} s   ratio {report.ratio_to_published:.3f}"
        )
    return "\n".join(lines)
