"""``python -m simulator run|philly|openb``: replay a trace under several policies; one table, JSON, plots."""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import click
import msgspec

from scheduling.queues import Queue
from scheduling.topology import NodeTopology, TopologyCache, TopologyDocument
from simulator import busy, openb, philly, report, table
from simulator.cluster_spec import ClusterSpec, ClusterSpecError, read_cluster
from simulator.compare import UnknownPolicyError, policy_names, run_all
from simulator.gpu_sets import GpuSets
from simulator.link_speed import DEFAULT_COMM_FRACTION, LinkSpeed
from simulator.loop import MODES, Mode, Policy
from simulator.metrics import Figures, figures
from simulator.openb import OpenbCounts
from simulator.policies import POLICIES
from simulator.policies.phalanx import Phalanx
from simulator.results import RunResult
from simulator.speed import PolluxSpeed, SpeedModel
from simulator.workloads import read_philly_jobs, read_pollux_workload

SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"

_POLICY_HELP = f"Comma-separated policies, or 'all' ({', '.join(POLICIES)})."


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """What ``--json`` writes for several policies: every row, every run's per-job JCTs and GPU sets.

    ``gpu_sets``: per policy and job, at each (re)allocation its time and the GPU indices it got per
    node index (``[[60, [[0, [2, 3]]]]]``).
    """

    workload: str
    mode: str
    seed: int
    published_avg_jct_s: dict[str, float]
    rows: list[Figures]
    jct_s: dict[str, dict[str, int]]
    gpu_sets: dict[str, dict[str, tuple[tuple[int, GpuSets], ...]]]
    openb: OpenbCounts | None = None


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
def main() -> None:
    """Trace simulator for GPU scheduling policies."""


def _names(spec: str) -> list[str]:
    try:
        return policy_names(spec, POLICIES)
    except UnknownPolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None


@main.command("run")
@click.option(
    "--workload",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Pollux workload CSV (name,time,application,num_replicas,batch_size).",
)
@click.option("--policy", default="tiresias", show_default=True, help=_POLICY_HELP)
@click.option("--mode", type=click.Choice(sorted(MODES)), default="pollux", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed handed to the policy.")
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
    published: Path | None,
    load: float,
    json_path: str | None,
    plots: Path | None,
) -> None:
    """Simulate WORKLOAD under each POLICY; print a table with the published averages beside it."""
    names = _names(policy)
    chosen = MODES[mode]
    jobs = read_pollux_workload(workload)
    results = run_all(jobs, [(n, POLICIES[n]) for n in names], PolluxSpeed.load(), chosen, seed=seed)
    path = published or workload.parent / report.PUBLISHED_FILE
    table_of = report.read_published(path) if path.is_file() else {}
    theirs = {p: v for (p, lo, w), v in sorted(table_of.items()) if lo == load and w == workload.stem}
    if len(results) == 1:  # one policy: the stage-1 report, unchanged
        built = report.build(workload.stem, results[0], theirs.get(names[0]))
        encoded = msgspec.json.format(msgspec.json.encode(built), indent=2) + b"\n"
        if json_path == "-":
            sys.stdout.buffer.write(encoded)
            return
        click.echo(report.text(built, chosen, load))
        _finish(workload.stem, chosen, seed, results, (), theirs, json_path=None, plots=plots, load=load)
        if json_path:
            Path(json_path).write_bytes(encoded)
        return
    _finish(workload.stem, chosen, seed, results, (), theirs, json_path=json_path, plots=plots, load=load)


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


@main.command("philly")
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
@click.option("--seed", type=int, default=0, show_default=True)
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
    names = _names(policy)
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
    factories = [(n, _with_queues(n, made.queues, documents, rack_size)) for n in names]
    until = int((hours + drain_hours) * 3600)
    results = run_all(jobs, factories, speed, mode, seed=seed, until=until, topologies=topologies)
    _finish(f"philly-{start[:10]}", mode, seed, results, made.queues, {}, json_path=json_path, plots=plots)


@main.command("busy")
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


@main.command("openb")
@click.option(
    "--nodes",
    "nodes_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="openb node list (sn,cpu_milli,memory_mib,gpu,model), e.g. openb_node_list_gpu_node.csv.",
)
@click.option(
    "--pods",
    "pods_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="openb pod list (name,...,creation_time,deletion_time,scheduled_time).",
)
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
@click.option("--policy", default="phalanx,fifo,tiresias", show_default=True, help=_POLICY_HELP)
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
    names = _names(policy)
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
    factories = [(n, _with_queues(n, ())) for n in names]
    results = run_all(jobs, factories, speed, mode, seed=seed, until=until)
    _finish(
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


def _with_queues(
    name: str,
    queues: tuple[Queue, ...],
    documents: tuple[TopologyDocument | None, ...] = (),
    rack_size: int = 0,
) -> Callable[[], Policy[Any]]:
    """Phalanx policies get the queues, rigid jobs and the nodes' topology documents and racks.

    Philly and openb jobs do not scale, hence rigid; baselines ignore all of it (they place by node
    index, and the loop gives them the lowest free GPU indices).
    """
    factory = POLICIES[name]
    if (isinstance(factory, partial) and factory.func is Phalanx) or factory is Phalanx:
        keywords = factory.keywords if isinstance(factory, partial) else {}
        extra: dict[str, Any] = {"elastic": False, "queues": queues}
        if documents:
            extra |= {"documents": documents, "rack_size": rack_size}
        return partial(Phalanx, **{**keywords, **extra})
    return factory


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


def _finish(
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
) -> None:
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
    )
    encoded = msgspec.json.format(msgspec.json.encode(comparison), indent=2) + b"\n"
    if json_path == "-":
        sys.stdout.buffer.write(encoded)
        return
    size = f"{sum(mode.capacity)} GPUs" if mode.node_gpus else f"x {mode.gpus_per_node} GPUs"
    click.echo(
        f"{workload}: {mode.nodes} nodes {size}, {mode.step_seconds} s steps, "
        f"{mode.restart_penalty_seconds} s per allocation change, seed {seed}"
    )
    click.echo(table.render(rows))
    if published:
        click.echo(table.published_line(published, load))
    for line in table.goals(rows):
        click.echo(line)
    if plots is not None:
        from simulator.plots import write_plots  # matplotlib only when plots are asked for

        for path in write_plots(results, plots, workload, queues):
            click.echo(f"plot: {path}")
    if json_path:
        Path(json_path).write_bytes(encoded)


if __name__ == "__main__":
    main()
