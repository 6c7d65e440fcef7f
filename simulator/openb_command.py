"""``python -m simulator openb``: replay the Alibaba openb trace on its unlike nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from simulator import openb, philly
from simulator.compare import run_all
from simulator.comparison import POLICY_HELP, chosen_policies, show
from simulator.loop import Mode
from simulator.policies import for_rigid_trace
from simulator.speed import SpeedModel

F = TypeVar("F", bound=Callable[..., object])


def openb_files(pods_help: str) -> Callable[[F], F]:
    """The ``--nodes`` and ``--pods`` options every openb command takes (``pods_help`` says their use)."""
    file = click.Path(exists=True, dir_okay=False, path_type=Path)
    nodes = click.option(
        "--nodes",
        "nodes_path",
        required=True,
        type=file,
        help="openb node list (sn,cpu_milli,memory_mib,gpu,model), e.g. openb_node_list_gpu_node.csv.",
    )
    pods = click.option("--pods", "pods_path", required=True, type=file, help=pods_help)

    def wrap(command: F) -> F:
        return nodes(pods(command))

    return wrap


@click.command("openb")
@openb_files("openb pod list (name,...,creation_time,deletion_time,scheduled_time).")
@click.option("--start", type=int, default=0, show_default=True, help="Window start, trace seconds.")
@click.option("--hours", type=float, help="Window length [default: to the last pod].")
@click.option(
    "--drain-hours", type=float, default=24.0, show_default=True, help="Simulated after the window."
)
@click.option(
    "--node-scale",
    type=click.FloatRange(0, 1, min_open=True),
    default=1.0,
    show_default=True,
    help="Simulate this share of the GPU nodes, spread evenly over the list.",
)
@click.option(
    "--penalty", type=float, default=0.2, show_default=True, help="Slowdown per extra node spanned."
)
@click.option("--policy", default="phalanx,fifo,tiresias", show_default=True, help=POLICY_HELP)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "json_path", help="Write the comparison as JSON to this file ('-' for stdout only).")
@click.option("--plots", type=click.Path(file_okay=False, path_type=Path), help="Write PNG plots into DIR.")
def openb_command(
    nodes_path: Path,
    pods_path: Path,
    start: int,
    hours: float | None,
    drain_hours: float,
    node_scale: float,
    penalty: float,
    policy: str,
    seed: int,
    json_path: str | None,
    plots: Path | None,
) -> None:
    """Replay the Alibaba openb trace (FGD, ATC'23) on its unlike nodes; pods are rigid jobs."""
    names = chosen_policies(policy)
    nodes = openb.read_nodes(nodes_path)
    gpu_nodes = openb.node_sizes(nodes)
    if not gpu_nodes:
        msg = f"{nodes_path}: no node has a GPU"
        raise click.UsageError(msg)
    sizes = openb.scale_nodes(gpu_nodes, node_scale)
    end = None if hours is None else start + int(hours * 3600)
    jobs, counts = openb.to_jobs(openb.read_pods(pods_path), nodes, sizes, start=start, end=end)
    if not jobs:
        msg = f"no GPU pod to simulate in the window from {start} s ({hours} h)"
        raise click.UsageError(msg)
    mode = Mode("openb", len(sizes), max(sizes), 60, 30, node_gpus=sizes)
    shapes = ", ".join(f"{n} x {g}" for g, n in sorted(Counter(sizes).items(), reverse=True))
    window = f"{start} s + {hours:g} h" if hours is not None else f"{start} s to the last pod"
    if json_path != "-":  # '-': the JSON alone on stdout
        click.echo(f"openb {pods_path.name} {window}: {len(sizes)} nodes ({shapes} GPUs), {sum(sizes)} GPUs")
        click.echo(openb.describe(counts))
    speed: SpeedModel = philly.RigidSpeed(max(sizes), penalty)
    until = None if end is None else end - start + int(drain_hours * 3600)
    factories = [(n, for_rigid_trace(n, ())) for n in names]
    results = run_all(jobs, factories, speed, mode, seed=seed, until=until)
    show(
        f"openb-{pods_path.stem}",
        mode,
        seed,
        results,
        (),
        {},
        json_path=json_path,
        plots=plots,
        openb_counts=counts,
    )
