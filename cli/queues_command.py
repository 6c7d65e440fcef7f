"""``phalanx queues``: the queue tree with quota, weight, limit, allocated, fair share and pending.

The figures are the queue view's (``scheduling.queues.view``, laid out by ``scheduling.queues.queue_table``),
built from one read of the cluster as the placement manager builds it for the Queue status: no promises,
so a bind in flight counts once its Binding is written. A queue holding more than its fair share, or
less than its quota while its own work waits, is marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from cli.cli_settings import CliSettings
from cli.connection import connect, read
from cli.options import cluster_options
from cli.output import Report, render
from scheduling.cluster.promises import PromiseBook
from scheduling.queues.queue_table import QueueFigures, ResourceFigures, queue_rows
from scheduling.queues.view import QueueView, view_of
from scheduling.resources import GPU, format_amount

SHORT_NAMES = {GPU: "gpu", "cpu": "cpu", "memory": "memory"}
"""The resource names the table uses."""


def _amount(resource: str, value: int | None) -> int | str | None:
    """GPUs as a count, CPU and memory as Kubernetes quantities (``1500m``, ``16Gi``)."""
    if value is None or resource == GPU:
        return value
    return format_amount(resource, value)


def _resource_item(figures: ResourceFigures) -> dict[str, Any]:
    r = figures.resource
    return {
        "quota": _amount(r, figures.quota),
        "overQuotaWeight": figures.weight,
        "limit": _amount(r, figures.limit),
        "allocated": _amount(r, figures.allocated),
        "deserved": _amount(r, figures.deserved),
        "fairShare": _amount(r, figures.fair_share),
        "pending": _amount(r, figures.pending),
    }


def status_words(row: QueueFigures) -> list[str]:
    """The marks of a queue row: ``over fair share``, ``below quota, work waiting``."""
    words = []
    if row.over_fair_share:
        words.append("over fair share")
    if row.starved:
        words.append("below quota, work waiting")
    return words


def queue_items(rows: Sequence[QueueFigures]) -> list[dict[str, Any]]:
    """The JSON items, in tree order."""
    return [
        {
            "name": row.name,
            "parent": row.parent,
            "depth": row.depth,
            "leaf": row.leaf,
            "resources": {f.resource: _resource_item(f) for f in row.resources},
            "overFairShare": row.over_fair_share,
            "belowQuotaWithWorkWaiting": row.starved,
            "status": status_words(row),
        }
        for row in rows
    ]


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def queue_table(items: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: one row per queue and resource, names indented by depth."""
    several = any(len(item["resources"]) > 1 for item in items)
    figures = ["QUOTA", "WEIGHT", "LIMIT", "ALLOCATED", "DESERVED", "FAIR SHARE", "PENDING"]
    headers = ["QUEUE", *(["RESOURCE"] if several else []), *figures, "STATUS"]
    rows: list[list[str]] = []
    for item in items:
        for i, (resource, values) in enumerate(item["resources"].items()):
            name = "  " * item["depth"] + item["name"] if i == 0 else ""
            cells = [_cell(v) for v in values.values()]
            status = ", ".join(item["status"]) if i == 0 else ""
            rows.append([name, *([SHORT_NAMES[resource]] if several else []), *cells, status])
    return headers, rows


def queues_report(view: QueueView) -> Report:
    """The report of ``view``."""
    items = queue_items(queue_rows(view))
    headers, rows = queue_table(items)
    return Report("QueueList", items, headers, rows)


@click.command("queues")
@cluster_options()
def command(settings: CliSettings) -> None:
    """The queue tree: quota, weight, limit, allocated, fair share and pending per resource.

    GPU always; CPU and memory when some queue sets them. A queue over its fair share, or below its
    quota while its own work waits, is marked in STATUS.
    """
    found = read(connect(settings))
    view = view_of(found.snapshot, PromiseBook())
    for problem in view.problems:
        click.echo(f"warning: set aside, with every queue below it: {problem}", err=True)
    for pod, why in sorted(view.misplaced.items()):
        click.echo(f"warning: pod {pod} is in no queue: {why}", err=True)
    click.echo(render(queues_report(view), settings.output), nl=False)
