"""What a command prints and writes after running several policies on one workload.

Every command (``run``, ``philly``, ``openb``) ends the same way: one row of figures per policy
(``simulator.run_figures``), the table and the goals on stdout, plots on request, and ``--json`` with every
row and every job's JCT and GPU sets (``Comparison``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import click
import msgspec

from scheduling.queues import Queue
from simulator import comparison_table
from simulator.compare import UnknownPolicyError, policy_names
from simulator.gpu_sets import GpuSets
from simulator.loop import Mode
from simulator.openb import OpenbCounts
from simulator.policies import POLICIES
from simulator.results import RunResult
from simulator.run_figures import Figures, figures

SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
"""The public traces beside the repository (``../shared/traces``), the commands' default inputs."""

POLICY_HELP = f"Comma-separated policies, or 'all' ({', '.join(POLICIES)})."


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """What ``--json`` writes for several policies: every row, every run's per-job JCTs and GPU sets.

    ``gpu_sets``: per policy and job, at each (re)allocation its time and the GPU indices it got per
    node index (``[[60, [[0, [2, 3]]]]]``). ``batch``: what the jobs did with their batch when their GPUs
    changed (``simulator/batch.py``; empty for traces of rigid jobs, which never change GPUs).
    """

    workload: str
    mode: str
    seed: int
    published_avg_jct_s: dict[str, float]
    rows: list[Figures]
    jct_s: dict[str, dict[str, int]]
    gpu_sets: dict[str, dict[str, tuple[tuple[int, GpuSets], ...]]]
    openb: OpenbCounts | None = None
    batch: str = ""


SEED_UNUSED = "the trace is replayed as written and no built-in policy draws randomness"
SEED_HELP = (
    "Seed handed to the policies (ClusterView.seed). No built-in policy draws randomness and the trace is "
    "replayed as written, so every seed gives the same result (said on stderr when not 0)."
)


def chosen_policies(spec: str) -> list[str]:
    """The policy names ``--policy`` lists; an unknown one is the option's error.

    Raises:
        click.BadParameter: a name no policy is registered under.
    """
    try:
        return policy_names(spec, POLICIES)
    except UnknownPolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None


def show(
    workload: str,
    mode: Mode,
    seed: int,
    results: Sequence[RunResult],
    queues: Sequence[Queue],
    published: dict[str, float],
    *,
    json_path: str | None,
    plots: Path | None,
    load: float = 1.0,
    openb_counts: OpenbCounts | None = None,
    seed_used: bool = False,
    batch: str = "",
) -> None:
    """Print the table, the published line and the goals; write plots and ``--json`` when asked.

    ``json_path`` ``-`` writes the JSON alone to stdout (nothing else is printed there). A seed that
    nothing draws on (``seed_used`` false) is said on stderr, so no one compares seeds that cannot differ.
    """
    if seed and not seed_used:
        click.echo(f"note: --seed {seed} changes nothing here: {SEED_UNUSED}", err=True)
    rows = [figures(result, queues) for result in results]
    comparison = Comparison(
        workload=workload,
        mode=mode.name,
        seed=seed,
        published_avg_jct_s=published,
        rows=rows,
        jct_s={r.policy: {job.name: job.jct for job in r.jobs} for r in results},
        gpu_sets={r.policy: {job.name: job.placements for job in r.jobs} for r in results},
        openb=openb_counts,
        batch=batch,
    )
    encoded = msgspec.json.format(msgspec.json.encode(comparison), indent=2) + b"\n"
    if json_path == "-":
        sys.stdout.buffer.write(encoded)
        return
    size = f"{sum(mode.capacity)} GPUs" if mode.node_gpus else f"x {mode.gpus_per_node} GPUs"
    click.echo(
        f"{workload}: {mode.nodes} nodes {size}, {mode.step_seconds} s steps, "
        f"{mode.restart_penalty_seconds} s per allocation change, seed {seed}"
        + (f", jobs' batch {batch}" if batch else "")
    )
    click.echo(comparison_table.render(rows))
    if published:
        click.echo(comparison_table.published_line(published, load))
    for line in comparison_table.goals(rows):
        click.echo(line)
    if plots is not None:
        from simulator.plots import write_plots  # matplotlib only when plots are asked for

        for path in write_plots(results, plots, workload, queues):
            click.echo(f"plot: {path}")
    if json_path:
        Path(json_path).write_bytes(encoded)
