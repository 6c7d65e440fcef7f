"""Busy windows of the Philly log: hours whose offered GPU demand exceeds the scaled cluster.

Jain's index (``metrics.jain``) has data only at decisions where the active jobs ask for more GPUs
than the cluster has, so a Philly run says something about fairness only over a window that is busy.
This finds such windows from the log alone, before any simulation: each job is taken to run from its
submission for its recorded duration on its GPUs (the demand it offers, ignoring queueing, which only
adds to it), and each hour's demand is its GPU-seconds over the hour. A window is scored as the
simulator replays it: only the jobs submitted in it (the replay starts from an empty cluster), on the
cluster ``philly.setup`` builds (the nodes of the virtual clusters submitting in it, times ``scale``).
Its busy hours are the hours in it whose demand exceeds that cluster.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from simulator.traces import PhillyJob

HOUR = 3600


@dataclass(frozen=True, slots=True)
class BusyWindow:
    """A window of ``hours`` from ``start`` as ``python -m simulator philly`` would replay it."""

    start: dt.datetime
    busy_hours: int
    """Hours of the window whose demand exceeds the cluster."""
    jobs: int
    queues: int
    gpus: int
    """The cluster ``philly.setup`` builds for the window's virtual clusters."""
    peak_demand: float
    """The largest hourly demand of the window as a multiple of the cluster's GPUs."""


def hourly_demand(jobs: Sequence[PhillyJob], origin: dt.datetime, hours: int) -> list[float]:
    """GPUs asked for on average in each hour from ``origin``, if every job ran from its submission."""
    demand = [0.0] * hours
    for job in jobs:
        begin = (job.timestamp - origin).total_seconds()
        end = begin + job.duration
        first, last = max(0, int(begin // HOUR)), min(hours - 1, int(end // HOUR))
        for hour in range(first, last + 1):
            overlap = min(end, (hour + 1) * HOUR) - max(begin, hour * HOUR)
            if overlap > 0:
                demand[hour] += overlap * job.num_gpus / HOUR
    return demand


def cluster_gpus(
    queues: Iterable[str], vc_nodes: Mapping[str, int], *, gpus_per_node: int, scale: float
) -> int:
    """The GPUs ``philly.setup`` gives a window in which ``queues`` submit."""
    return max(1, sum(round(vc_nodes.get(q, 0) * scale) for q in set(queues))) * gpus_per_node


def busy_windows(
    jobs: Sequence[PhillyJob],
    vc_nodes: Mapping[str, int],
    *,
    hours: int,
    gpus_per_node: int = 8,
    scale: float = 0.1,
    min_busy_hours: int = 2,
    min_queues: int = 3,
) -> list[BusyWindow]:
    """Windows of ``hours`` starting on the hour, busiest first (then the earliest).

    The simulation starts empty, so a window's demand is that of the jobs submitted in it only; its
    busy hours are those of the window whose demand exceeds the cluster built for its queues.
    """
    if not jobs:
        return []
    origin = min(job.timestamp for job in jobs).replace(minute=0, second=0, microsecond=0)
    span = int((max(job.timestamp for job in jobs) - origin).total_seconds() // HOUR) + 1
    submitted: list[list[PhillyJob]] = [[] for _ in range(span)]
    for job in jobs:
        submitted[int((job.timestamp - origin).total_seconds() // HOUR)].append(job)
    found = []
    for first in range(span):
        inside = [job for h in range(first, min(span, first + hours)) for job in submitted[h]]
        queues = {job.cluster for job in inside}
        if len(queues) < min_queues:
            continue
        start = origin + dt.timedelta(hours=first)
        gpus = cluster_gpus(queues, vc_nodes, gpus_per_node=gpus_per_node, scale=scale)
        demand = hourly_demand(inside, start, hours)
        busy = sum(1 for d in demand if d > gpus)
        if busy >= min_busy_hours:
            found.append(BusyWindow(start, busy, len(inside), len(queues), gpus, max(demand) / gpus))
    return sorted(found, key=lambda w: (-w.busy_hours, -w.peak_demand, w.start))
