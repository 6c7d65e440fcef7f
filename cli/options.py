"""kubectl's global flags, accepted before the subcommand and after it, merged into one ``CliSettings``.

The group (``cli.program``) keeps the flags given before the subcommand; :func:`cluster_options` adds the same
flags to a subcommand and hands the command the merged settings (``cli.cli_settings.settings_from``), so each
command reads its settings as one frozen value and never touches the environment.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cli.cli_settings import CliSettings, Flags, Output, settings_from

OUTPUT_CHOICE = click.Choice([o.value for o in Output])


def kubeconfig_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--kubeconfig``."""
    return click.option(
        "--kubeconfig",
        default=None,
        metavar="PATH",
        help="kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config, else in-cluster).",
    )(f)


def context_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--context``."""
    return click.option("--context", default=None, help="kubeconfig context (default: its current one).")(f)


def namespace_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-n/--namespace``."""
    return click.option(
        "-n", "--namespace", default=None, help="only this namespace (default: all namespaces)."
    )(f)


def output_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``-o/--output``."""
    return click.option(
        "-o", "--output", type=OUTPUT_CHOICE, default=None, help="table (default), json or yaml."
    )(f)


def group_flags(ctx: click.Context) -> Flags:
    """The flags given before the subcommand (none when the group was not run, as in a unit test)."""
    found = ctx.find_object(Flags)
    return found if found is not None else Flags()


def cluster_options(
    *, cluster: bool = True, namespace: bool = False, output: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the global flags to a subcommand and call it with ``settings`` (the merged ``CliSettings``).

    Args:
        cluster: the command reads the cluster, so it takes ``--kubeconfig`` and ``--context``.
        namespace: the command takes ``-n``; without it a namespace given before the subcommand is
            ignored, as kubectl ignores it for cluster-scoped resources.
        output: the command takes ``-o``.
    """

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            ctx = click.get_current_context()
            given = Flags(
                kwargs.pop("kubeconfig", None),
                kwargs.pop("context", None),
                kwargs.pop("namespace", None),
                kwargs.pop("output", None),
            )
            settings: CliSettings = settings_from(
                given.over(group_flags(ctx)), environ=os.environ, home=Path.home()
            )
            return command(settings=settings, **kwargs)

        wrapped: Callable[..., Any] = run
        for option in (
            output_option if output else None,
            namespace_option if namespace else None,
            context_option if cluster else None,
            kubeconfig_option if cluster else None,
        ):
            if option is not None:
                wrapped = option(wrapped)
        return wrapped

    return decorate
