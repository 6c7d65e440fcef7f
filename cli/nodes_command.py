"""``phalanx nodes``: per node, its state, GPUs free and total, who holds which index, free NVLink islands.

The figures are the core's (``scheduling.nodes.node_table``): holders from the pods' ``phalanx.io/gpus``
annotations, free counts as the placement manager's metrics count them, islands from the node's topology
document. GPUs promised to a bind in flight are in the extender's memory only and show as free here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from cli.cli_settings import CliSettings
from cli.connection import connect, read
from cli.options import cluster_options
from cli.output import Report, render
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.nodes.node_table import NodeRow, node_rows


def holdings(holders: Mapping[int, tuple[str, ...]]) -> list[dict[str, Any]]:
    """Each holding pod with the GPU indices it holds, ordered by its lowest index, then by name.

    >>> holdings({0: ("ml/a",), 1: ("ml/a",), 2: ("ml/b",)})
    [{'pod': 'ml/a', 'gpus': [0, 1]}, {'pod': 'ml/b', 'gpus': [2]}]
    """
    by_pod: dict[str, list[int]] = {}
    for index in sorted(holders):
        for pod in holders[index]:
            by_pod.setdefault(pod, []).append(index)
    return [{"pod": pod, "gpus": gpus} for pod, gpus in sorted(by_pod.items(), key=lambda kv: (kv[1], kv[0]))]


def node_items(rows: Sequence[NodeRow]) -> list[dict[str, Any]]:
    """The JSON items, sorted by node name."""
    return [
        {
            "name": row.name,
            "ready": row.ready,
            "cordoned": row.cordoned,
            "gpus": {
                "total": row.total,
                "allocated": row.allocated,
                "free": row.free,
                "freeIndices": list(row.free_indices),
                "unindexed": row.unindexed,
            },
            "holders": holdings(row.holders),
            "freeNvlinkIslands": None if row.islands is None else [list(i) for i in row.islands],
            "topologyProblem": row.topology_problem,
        }
        for row in rows
    ]


def _indices(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in gpus)


def node_table(items: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Headers and one row per node."""
    headers = ["NODE", "STATUS", "GPUS FREE/TOTAL", "FREE INDICES", "HOLDERS", "FREE NVLINK ISLANDS"]
    rows = []
    for item in items:
        gpus = item["gpus"]
        held = [f"{h['pod']}[{_indices(h['gpus'])}]" for h in item["holders"]]
        if gpus["unindexed"]:
            held.append(f"{gpus['unindexed']} without index")
        islands = item["freeNvlinkIslands"]
        island_text = (
            "no topology" if islands is None else " ".join(f"[{_indices(i)}]" for i in islands) or "-"
        )
        if item["topologyProblem"]:
            island_text = "unreadable topology"
        rows.append(
            [
                item["name"],
                status_of(item),
                f"{gpus['free']}/{gpus['total']}",
                _indices(gpus["freeIndices"]) or "-",
                " ".join(held) or "-",
                island_text,
            ]
        )
    return headers, rows


def status_of(item: Mapping[str, Any]) -> str:
    """The node status kubectl shows: ``Ready`` or ``NotReady``, with ``SchedulingDisabled`` if cordoned."""
    return ("Ready" if item["ready"] else "NotReady") + (",SchedulingDisabled" if item["cordoned"] else "")


def nodes_report(snapshot: ClusterSnapshot) -> Report:
    """The report of every node of ``snapshot``."""
    items = node_items(node_rows(snapshot))
    headers, rows = node_table(items)
    return Report("NodeList", items, headers, rows)


@click.command("nodes")
@cluster_options()
def command(settings: CliSettings) -> None:
    """Per node: ready/cordoned, GPUs free/total, which pod holds which GPU index, free NVLink islands."""
    found = read(connect(settings))
    click.echo(render(nodes_report(found.snapshot), settings.output), nl=False)
