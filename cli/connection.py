"""Reaching the cluster from the command line: one connection, one read, problems told on stderr.

The composition root of the tool (docs/design/style.md §8): only here are a real API client and the wall
clock made; commands receive what they read. Errors of the adapter become one line on stderr and exit
status 1, as kubectl reports them, never a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import click

from cli.cli_settings import CliSettings
from kubeio.cluster_read import ClusterRead, read_cluster
from kubeio.errors import KubeconfigError, KubeError
from kubeio.http import KubeHttp, load_api_client
from scheduling.offline.replay import ReplayError

T = TypeVar("T")

USER_AGENT = "phalanx-cli"


class ReplayFileError(click.ClickException):
    """A file the tool cannot replay: exit status 2 (1 is a replay that came out different)."""

    exit_code = 2


def connect(settings: CliSettings) -> KubeHttp:
    """The API server connection the settings name.

    Raises:
        click.ClickException: no usable kubeconfig or in-cluster configuration.
    """
    try:
        client = load_api_client(settings.kubeconfig, pool_size=4, context=settings.context)
    except KubeconfigError as exc:
        hint = "" if settings.kubeconfig else " (no kubeconfig: pass --kubeconfig or set KUBECONFIG)"
        msg = f"{exc}{hint}"
        raise click.ClickException(msg) from exc
    return KubeHttp(client, user_agent=USER_AGENT)


def read(http: KubeHttp) -> ClusterRead:
    """Read the whole cluster once; every object skipped and every warning goes to stderr.

    Raises:
        click.ClickException: a list failed.
    """
    found = api_call(lambda: read_cluster(http))
    for problem in found.problems():
        click.echo(f"warning: {problem}", err=True)
    return found


def api_call(call: Callable[[], T]) -> T:
    """``call()``, its ``KubeError`` turned into the tool's one-line error.

    Raises:
        click.ClickException: the API server refused or could not be reached.
    """
    try:
        return call()
    except KubeError as exc:
        msg = f"the API server said: {exc}"
        raise click.ClickException(msg) from exc


@contextmanager
def replay_errors() -> Iterator[None]:
    """Turn a file that cannot be read or replayed into exit status 2 with the reason."""
    try:
        yield
    except (OSError, ReplayError) as exc:
        raise ReplayFileError(str(exc)) from exc


def wall_clock() -> float:
    """Seconds since the epoch now: how long gangs have waited, when a snapshot was taken."""
    return time.time()
