"""The ``phalanx`` program (also ``kubectl-phalanx``, so ``kubectl phalanx ...`` works): its subcommands.

Each subcommand lives in its own module and is registered here on one line, so adding one is one import
and one line.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from cli import gangs_command, nodes_command, queues_command, replay_command, snapshot_command, why_command
from cli.cli_settings import Flags
from cli.options import context_option, kubeconfig_option, namespace_option, output_option


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@kubeconfig_option
@context_option
@namespace_option
@output_option
@click.pass_context
def app(
    ctx: click.Context, kubeconfig: str | None, context: str | None, namespace: str | None, output: str | None
) -> None:
    """What the phalanx GPU scheduler sees and decides: queues, gangs, nodes, why a pod waits, snapshots.

    Every figure is computed by phalanx's own core from one read of the cluster, so it is what the
    extender and the placement manager compute. Flags may come before or after the subcommand.
    """
    ctx.obj = Flags(kubeconfig, context, namespace, output)


app.add_command(queues_command.command)
app.add_command(gangs_command.command)
app.add_command(nodes_command.command)
app.add_command(snapshot_command.command)
app.add_command(replay_command.command)
app.add_command(why_command.command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the program on ``argv`` (default: the process's arguments) and return its exit status."""
    try:
        status = app.main(
            args=list(argv) if argv is not None else None, prog_name="phalanx", standalone_mode=False
        )
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("Aborted!", err=True)
        return 1
    return status if isinstance(status, int) else 0
