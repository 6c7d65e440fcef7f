"""``python -m simulator run|philly|busy|openb``: replay a trace under several policies; table, JSON, plots.

``run`` (Pollux workloads) is here; ``philly`` and ``busy`` are in ``simulator.philly_commands``,
``openb`` in ``simulator.openb_command``; every one ends in ``simulator.comparison.show``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec

from simulator import report
from simulator.batch import JobBatch
from simulator.cluster_spec import ClusterSpecError
from simulator.compare import run_all
from simulator.comparison import POLICY_HELP, SEED_HELP, chosen_policies, show
from simulator.gpu_sets import GpuSetError
from simulator.loop import MODES, SimulationError
from simulator.openb_command import openb_command
from simulator.packing_command import packing_command
from simulator.philly_commands import busy_command, philly_command
from simulator.policies import POLICIES
from simulator.speed import PolluxSpeed, SpeedError
from simulator.traces import WorkloadError, read_pollux_workload

INPUT_ERRORS = (
    WorkloadError,
    SpeedError,
    ClusterSpecError,
    GpuSetError,
    SimulationError,
    OSError,
    ValueError,
)
"""What bad input ends in: a file that cannot be read as a trace, a job the speed model has no data for,
a cluster file that is wrong, a run that cannot go on. Each says where and why in one line."""


class Simulator(click.Group):
    """The command group: a bad input file ends in a one-line error and exit status 1, not a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        """Run the subcommand; turn an input error into ``click.ClickException``."""
        try:
            return super().invoke(ctx)
        except click.ClickException:
            raise
        except INPUT_ERRORS as exc:
            raise click.ClickException(str(exc) or type(exc).__name__) from None


@click.group(
    cls=Simulator, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}
)
def main() -> None:
    """Trace simulator for GPU scheduling policies."""


@main.command("run")
@click.option(
    "--workload",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pollux workload CSV (name,time,application,num_replicas,batch_size).",
)
@click.option("--policy", default="tiresias", show_default=True, help=POLICY_HELP)
@click.option("--mode", type=click.Choice(sorted(MODES)), default="pollux", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help=SEED_HELP)
@click.option(
    "--batch",
    type=click.Choice([b.value for b in JobBatch]),
    default=JobBatch.SCALED.value,
    show_default=True,
    help="What a job does with its batch on other GPUs than it asked for: keep the total (fixed), keep "
    "the per-worker batch as elastic Horovod does (scaled), or pick the best for goodput as AdaptDL does "
    "(tuned).",
)
@click.option(
    "--published",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Published JCTs CSV [default: {report.PUBLISHED_FILE} beside the workload].",
)
@click.option("--load", type=float, default=1.0, show_default=True, help="Relative job load to compare at.")
@click.option("--json", "json_path", help="Also write the report as JSON to this file ('-' for stdout only).")
@click.option("--plots", type=click.Path(file_okay=False, path_type=Path), help="Write PNG plots into DIR.")
def run_command(
    workload: Path,
    policy: str,
    mode: str,
    seed: int,
    batch: str,
    published: Path | None,
    load: float,
    json_path: str | None,
    plots: Path | None,
) -> None:
    """Simulate WORKLOAD under each POLICY; print a table with the published averages beside it."""
    names = chosen_policies(policy)
    chosen = MODES[mode]
    jobs = read_pollux_workload(workload)
    speed = PolluxSpeed.load(batch=JobBatch(batch))
    results = run_all(jobs, [(n, POLICIES[n]) for n in names], speed, chosen, seed=seed)
    path = published or workload.parent / report.PUBLISHED_FILE
    table_of = report.read_published(path) if path.is_file() else {}
    theirs = {p: v for (p, lo, w), v in sorted(table_of.items()) if lo == load and w == workload.stem}
    one = len(results) == 1  # one policy: the stage-1 report, unchanged, and the table after it
    if one:
        built = report.build(workload.stem, results[0], theirs.get(names[0]))
        encoded = msgspec.json.format(msgspec.json.encode(built), indent=2) + b"\n"
        if json_path == "-":
            sys.stdout.buffer.write(encoded)
            return
        click.echo(report.text(built, chosen, load))
    table_json = None if one else json_path
    show(
        workload.stem,
        chosen,
        seed,
        results,
        (),
        theirs,
        json_path=table_json,
        plots=plots,
        load=load,
        batch=batch,
    )
    if one and json_path:
        Path(json_path).write_bytes(encoded)


main.add_command(philly_command)
main.add_command(busy_command)
main.add_command(openb_command)
main.add_command(packing_command)

if __name__ == "__main__":
    main()
