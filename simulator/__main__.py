"""``python -m simulator run``: replay one workload under one policy and compare with the published JCT."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec

from simulator import report
from simulator.loop import MODES, run
from simulator.policies import POLICIES
from simulator.speed import PolluxSpeed
from simulator.workloads import read_pollux_workload


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def main() -> None:
    """Trace simulator for GPU scheduling policies."""


@main.command("run")
@click.option(
    "--workload",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pollux workload CSV (name,time,application,num_replicas,batch_size).",
)
@click.option("--policy", type=click.Choice(sorted(POLICIES)), default="tiresias", show_default=True)
@click.option("--mode", type=click.Choice(sorted(MODES)), default="pollux", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed handed to the policy.")
@click.option(
    "--published",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Published JCTs CSV [default: {report.PUBLISHED_FILE} beside the workload].",
)
@click.option("--load", type=float, default=1.0, show_default=True, help="Relative job load to compare at.")
@click.option("--json", "json_path", help="Also write the report as JSON to this file ('-' for stdout only).")
def run_command(
    workload: Path,
    policy: str,
    mode: str,
    seed: int,
    published: Path | None,
    load: float,
    json_path: str | None,
) -> None:
    """Simulate WORKLOAD under POLICY and print avg/p50/p99 JCT beside the published average."""
    chosen = MODES[mode]
    result = run(read_pollux_workload(workload), POLICIES[policy](), PolluxSpeed.load(), chosen, seed=seed)
    table = published or workload.parent / report.PUBLISHED_FILE
    figure = report.read_published(table).get((policy, load, workload.stem)) if table.is_file() else None
    built = report.build(workload.stem, result, figure)
    encoded = msgspec.json.format(msgspec.json.encode(built), indent=2) + b"\n"
    if json_path == "-":
        sys.stdout.buffer.write(encoded)
        return
    click.echo(report.text(built, chosen, load))
    if json_path:
        Path(json_path).write_bytes(encoded)


if __name__ == "__main__":
    main()
