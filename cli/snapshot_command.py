"""``phalanx snapshot save FILE``: the cluster as the core sees it, in one file anyone can replay offline.

The file is ``scheduling.offline.snapshot_file``'s: nodes with their topology documents, every pod, PodGroup
and Queue, the time it was taken, and the session settings a replay decides with (the defaults: the
extender's environment is not visible from here). ``phalanx replay FILE`` re-runs the core's filter on
it with no cluster, so the file can be attached to a bug report.
"""

from __future__ import annotations

from pathlib import Path

import click

from cli.cli_settings import CliSettings
from cli.connection import connect, read, wall_clock
from cli.options import cluster_options
from scheduling.offline.snapshot_file import save_snapshot


@click.group("snapshot")
def command() -> None:
    """Save the cluster state phalanx sees to a file, for `phalanx replay`."""


@command.command("save")
@cluster_options(output=False)
@click.argument("file", type=click.Path(dir_okay=False, writable=True, allow_dash=True, path_type=Path))
def save(settings: CliSettings, file: Path) -> None:
    """Save nodes (with GPU topology), pods, PodGroups and Queues to FILE ('-' for stdout)."""
    snapshot = read(connect(settings)).snapshot
    data = save_snapshot(snapshot, taken=wall_clock())
    if str(file) == "-":
        click.echo(data.decode())
    else:
        file.write_bytes(data)
    click.echo(
        f"saved {len(snapshot.nodes)} nodes, {len(snapshot.pods)} pods, {len(snapshot.groups)} PodGroups "
        f"and {len(snapshot.queues)} Queues to {file}",
        err=True,
    )
