"""``python -m simulator openb-pack``: FGD's packing experiment on the openb nodes (``simulator.packing``)."""

from __future__ import annotations

from pathlib import Path

import click
import msgspec

from simulator import openb
from simulator.openb_command import openb_files
from simulator.packing import CHECKPOINTS, Packing, draw, pack, policies, tasks_of

POLICIES = ("phalanx", "fgd", "best-fit", "worst-fit", "first-fit", "random")


@click.command("openb-pack")
@openb_files("openb pod list: the pods drawn from (each kind as often as in the list).")
@click.option(
    "--until",
    type=click.FloatRange(0.1, 3.0),
    default=1.0,
    show_default=True,
    help="Draw pods until they ask for this share of the GPUs.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The draw (and the random policy).")
@click.option(
    "--policy",
    default=",".join(POLICIES),
    show_default=True,
    help="Comma-separated, of: " + ", ".join(POLICIES),
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False, path_type=Path), help="Also write JSON here."
)
def packing_command(
    nodes_path: Path, pods_path: Path, until: float, seed: int, policy: str, json_path: Path | None
) -> None:
    """Pack pods drawn from the openb trace until they ask for the GPUs (FGD's method); nothing leaves."""
    names = [n.strip() for n in policy.split(",") if n.strip()]
    unknown = sorted(set(names) - set(POLICIES))
    if unknown or not names:
        msg = f"--policy: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(POLICIES)}"
        raise click.UsageError(msg)
    nodes = [n for n in openb.read_nodes(nodes_path) if n.gpu > 0]
    if not nodes:
        msg = f"{nodes_path}: no node has a GPU"
        raise click.UsageError(msg)
    tasks = tasks_of(openb.read_pods(pods_path))
    if not tasks:
        msg = f"{pods_path}: no pod asks for a GPU"
        raise click.UsageError(msg)
    capacity = sum(n.gpu for n in nodes)
    arrivals = draw(tasks, capacity, until, seed)
    build = policies(nodes, tasks, seed)
    results = [pack(nodes, arrivals, name, build[name]()) for name in names]
    click.echo(
        f"openb-pack {pods_path.name}: {len(nodes)} nodes, {capacity} GPUs; {len(arrivals)} pods drawn"
        f" (seed {seed}) until they ask for {until:.0%} of the GPUs; a pod asking for part of a GPU takes"
        " a whole one"
    )
    click.echo(_table(results, capacity))
    if json_path is not None:
        json_path.write_bytes(
            msgspec.json.encode(
                {
                    "nodes": len(nodes),
                    "capacity_gpus": capacity,
                    "pods_drawn": len(arrivals),
                    "until": until,
                    "seed": seed,
                    "policies": [
                        {
                            "policy": r.policy,
                            "allocated_gpus": {str(k): v for k, v in sorted(r.allocated.items())},
                            "placed": r.placed,
                            "refused": r.refused,
                            "unallocated_gpus": r.unallocated,
                        }
                        for r in results
                    ],
                }
            )
        )


def _table(results: list[Packing], capacity: int) -> str:
    """Allocated GPUs (% of capacity) as the arrivals reach each checkpoint, then the end."""
    marks = [m for m in CHECKPOINTS if any(m in r.allocated for r in results)]
    head = f"{'policy':<10}" + "".join(f"{f'{m}%':>7}" for m in marks)
    lines = [
        f"allocated GPUs, % of {capacity}, when the pods drawn ask for:",
        head + "   placed  refused  unallocated",
    ]
    for r in results:
        cells = "".join(
            f"{100 * r.allocated[m] / capacity:7.1f}" if m in r.allocated else f"{'-':>7}" for m in marks
        )
        lines.append(f"{r.policy:<10}{cells}  {r.placed:7d}  {r.refused:7d}  {r.unallocated:11d}")
    return "\n".join(lines)
