"""Several policies on one workload, one after the other, with the same speed model and mode.

Each policy gets a fresh instance (its own caches) and the same seed; the runs share nothing but the
speed model's memo of step times, which is a pure function's cache. A progress bar (rich) goes to
stderr when it is a terminal, one task per policy, advanced as jobs complete.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scheduling.topology import NodeTopology
from simulator.loop import POLLUX, Mode, Policy, run
from simulator.results import RunResult
from simulator.speed import SpeedModel
from simulator.traces import TraceJob


class UnknownPolicyError(ValueError):
    """A policy name that is not registered."""


def policy_names(spec: str, registry: Mapping[str, object]) -> list[str]:
    """The policies a ``--policy`` value names: a comma-separated list, or ``all``.

    >>> policy_names("fifo, phalanx", {"fifo": 1, "phalanx": 2, "tiresias": 3})
    ['fifo', 'phalanx']
    >>> policy_names("all", {"b": 1, "a": 2})
    ['b', 'a']
    """
    if spec.strip() == "all":
        return list(registry)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in registry]
    if unknown or not names:
        msg = f"unknown policy {', '.join(unknown) or spec!r}; known: {', '.join(registry)}"
        raise UnknownPolicyError(msg)
    return list(dict.fromkeys(names))


def run_all(
    jobs: Sequence[TraceJob],
    policies: Sequence[tuple[str, Callable[[], Policy[Any]]]],
    speed: SpeedModel,
    mode: Mode = POLLUX,
    *,
    seed: int = 0,
    until: int | None = None,
    start: int = 0,
    progress: bool | None = None,
    topologies: Sequence[NodeTopology | None] = (),
) -> list[RunResult]:
    """Run every policy on ``jobs``; ``progress`` None shows the bar only when stderr is a terminal.

    ``topologies`` (each node's GPU topology) goes to the loop for the NVLink verdicts.
    """
    show = sys.stderr.isatty() if progress is None else progress
    bar = (
        Progress(
            TextColumn("{task.description:<20}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            transient=False,
        )
        if show
        else None
    )
    results = []
    with bar if bar is not None else nullcontext():
        for name, factory in policies:
            on_step = None
            if bar is not None:
                task = bar.add_task(name, total=len(jobs))

                def on_step(done: int, total: int, task: Any = task) -> None:
                    bar.update(task, completed=done, total=total)

            results.append(
                run(
                    jobs,
                    factory(),
                    speed,
                    mode,
                    seed=seed,
                    start=start,
                    until=until,
                    timeline=True,
                    on_step=on_step,
                    topologies=topologies,
                )
            )
    return results
