"""``python -m simulator philly`` and ``busy``: replay a Philly window, and find the busy ones."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import click

from scheduling.topology import NodeTopology, TopologyCache, TopologyDocument
from simulator import busy, philly
from simulator.cluster_spec import ClusterSpec, ClusterSpecError, read_cluster
from simulator.compare import run_all
from simulator.comparison import SEED_HELP, SHARED_TRACES, chosen_policies, show
from simulator.link_speed import DEFAULT_COMM_FRACTION, LinkSpeed
from simulator.loop import Mode
from simulator.policies import for_rigid_trace
from simulator.speed import SpeedModel
from simulator.traces import read_philly_jobs


def _philly_inputs(command: Callable[..., None]) -> Callable[..., None]:
    """The ``--trace`` and ``--quotas`` options of the commands that read the Philly log."""
    trace = click.option(
        "--trace",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=SHARED_TRACES / "philly" / "philly_jobs_pollux.csv",
        show_default=True,
        help="Philly job log (timestamp,duration,num_gpus,gpu_time,cluster).",
    )
    quotas = click.option(
        "--quotas",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=SHARED_TRACES / "philly" / "philly_vc_nodes_helios.csv",
        show_default=True,
        help="Nodes per virtual cluster (vc,node num).",
    )
    return trace(quotas(command))


@click.command("philly")
@_philly_inputs
@click.option("--start", default="2017-10-09 00:00:00", show_default=True, help="Window start.")
@click.option("--hours", type=float, default=12.0, show_default=True, help="Window length.")
@click.option(
    "--drain-hours", type=float, default=12.0, show_default=True, help="Simulated after the window."
)
@click.option("--scale", type=float, default=0.1, show_default=True, help="Nodes per VC times this.")
@click.option("--gpus-per-node", type=int, default=8, show_default=True)
@click.option(
    "--penalty", type=float, default=0.2, show_default=True, help="Slowdown per extra node spanned."
)
@click.option(
    "--policy", default="phalanx,phalanx-no-reclaim,phalanx-no-topology,fifo,tiresias", show_default=True
)
@click.option("--seed", type=int, default=0, show_default=True, help=SEED_HELP)
@click.option(
    "--cluster",
    "cluster_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Cluster description (TOML: node groups, each with its `nvidia-smi topo -m`); replaces "
    "--gpus-per-node, and a group without a count gets the nodes the quotas need.",
)
@click.option(
    "--comm-fraction",
    type=float,
    default=DEFAULT_COMM_FRACTION,
    show_default=True,
    help="With --cluster: share of a step spent in all-reduce at 12 GB/s (simulator/link_speed.py).",
)
@click.option("--json", "json_path", help="Write the comparison as JSON to this file ('-' for stdout only).")
@click.option("--plots", type=click.Path(file_okay=False, path_type=Path), help="Write PNG plots into DIR.")
def philly_command(
    trace: Path,
    quotas: Path,
    start: str,
    hours: float,
    drain_hours: float,
    scale: float,
    gpus_per_node: int,
    penalty: float,
    policy: str,
    seed: int,
    cluster_path: Path | None,
    comm_fraction: float,
    json_path: str | None,
    plots: Path | None,
) -> None:
    """Replay a window of the Philly log with each virtual cluster a queue (rigid jobs)."""
    spec = _cluster(cluster_path)
    gpus_per_node = spec.gpus_per_node if spec is not None else gpus_per_node
    names = chosen_policies(policy)
    jobs = philly.window(read_philly_jobs(trace), dt.datetime.fromisoformat(start), hours)
    if not jobs:
        msg = f"no job submitted in the {hours} h from {start}"
        raise click.UsageError(msg)
    made = philly.setup(jobs, philly.read_vc_nodes(quotas), gpus_per_node=gpus_per_node, scale=scale)
    nodes = spec.node_count(made.nodes) if spec is not None else made.nodes
    mode = Mode("philly", nodes, gpus_per_node, step_seconds=60, restart_penalty_seconds=30)
    click.echo(
        f"Philly {start} + {hours:g} h: {len(jobs)} jobs, {len(made.queues)} queues, {nodes} nodes x "
        f"{gpus_per_node} GPUs (VC nodes x {scale:g}), rigid jobs, {penalty:.0%} slower per extra node",
        err=json_path == "-",  # stdout carries only the JSON then
    )
    speed: SpeedModel = philly.RigidSpeed(gpus_per_node, penalty)
    documents: tuple[TopologyDocument | None, ...] = ()
    topologies: tuple[NodeTopology | None, ...] = ()
    if spec is not None:
        documents = spec.documents(made.nodes)
        topologies = spec.topologies(made.nodes, cache := TopologyCache())
        speed = LinkSpeed(
            philly.RigidSpeed(gpus_per_node, penalty),
            topologies,
            spec.network_mbs,
            comm_fraction,
            cache=cache,
        )
        click.echo(_describe(spec, documents, comm_fraction), err=json_path == "-")
    rack_size = spec.rack_size if spec is not None else 0
    factories = [(n, for_rigid_trace(n, made.queues, documents, rack_size)) for n in names]
    until = int((hours + drain_hours) * 3600)
    results = run_all(jobs, factories, speed, mode, seed=seed, until=until, topologies=topologies)
    show(f"philly-{start[:10]}", mode, seed, results, made.queues, {}, json_path=json_path, plots=plots)


@click.command("busy")
@_philly_inputs
@click.option("--scale", type=float, default=0.1, show_default=True, help="Nodes per VC times this.")
@click.option("--gpus-per-node", type=int, default=8, show_default=True)
@click.option("--hours", type=int, default=12, show_default=True, help="Window length.")
@click.option("--min-busy-hours", type=int, default=2, show_default=True, help="Fewest busy hours.")
@click.option("--min-queues", type=int, default=3, show_default=True, help="Fewest VCs submitting in it.")
@click.option("--top", type=int, default=10, show_default=True, help="Windows printed.")
def busy_command(
    trace: Path,
    quotas: Path,
    scale: float,
    gpus_per_node: int,
    hours: int,
    min_busy_hours: int,
    min_queues: int,
    top: int,
) -> None:
    """List windows whose offered GPU demand exceeds their cluster for hours (simulator/busy.py)."""
    found = busy.busy_windows(
        read_philly_jobs(trace),
        philly.read_vc_nodes(quotas),
        hours=hours,
        gpus_per_node=gpus_per_node,
        scale=scale,
        min_busy_hours=min_busy_hours,
        min_queues=min_queues,
    )
    click.echo(
        f"{len(found)} windows of {hours} h with >= {min_busy_hours} busy hours (VC nodes x {scale:g})"
    )
    click.echo(f"{'start':<20} {'busy h':>6} {'jobs':>6} {'VCs':>4} {'GPUs':>5} {'peak demand':>12}")
    for w in found[:top]:
        click.echo(
            f"{w.start:%Y-%m-%d %H:%M:%S} {w.busy_hours:>6} {w.jobs:>6,} {w.queues:>4} {w.gpus:>5} "
            f"{w.peak_demand:>11.2f}x"
        )


def _cluster(path: Path | None) -> ClusterSpec | None:
    if path is None:
        return None
    try:
        return read_cluster(path)
    except ClusterSpecError as exc:
        raise click.BadParameter(str(exc), param_hint="--cluster") from None


def _describe(spec: ClusterSpec, documents: tuple[TopologyDocument | None, ...], fraction: float) -> str:
    parts = []
    for group in spec.groups:
        count = sum(1 for d in documents if d is group.document) if group.count is None else group.count
        parts.append(f"{group.name} {count} x {group.gpus} ({group.source or 'no topology'})")
    racks = f", racks of {spec.rack_size}" if spec.rack_size else ""
    return (
        f"cluster {spec.path.name}: {', '.join(parts)}{racks}; network {spec.network_mbs:,} MB/s; "
        f"{fraction:.0%} of a step in all-reduce at 12 GB/s"
    )
