"""Attained service: the GPU-seconds an elastic job has run so far, across restarts of its workers.

Least attained service (``ElasticSettings.long_after_seconds``, weighed in ``scheduling.elastic.claim``)
needs each job's GPU-seconds so far. An elastic job's workers come and go: every resize restarts them all and
a move deletes one, so summing the run time of the workers alive now forgets all that ran before the
last restart. The placement manager therefore keeps a record on the job (``Attained``: GPU-seconds
counted up to a moment; ``kubeio.attained`` writes it on the MPIJob) and counts on from it: a job's
attained service now is the record plus, for each worker running now, its GPUs times the seconds it has
run since the later of its start and the record's moment.

The record is rewritten whenever the placement manager writes the job anyway, which includes every
resize and move it makes (in the same write, before a worker is deleted), so none of the time of
workers phalanx deletes is lost. What is lost is the time of workers deleted by others (a lost node,
a reclaim eviction) since the job was last written; a restarted placement manager counts on from the
record and the live workers' starts, and decides the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduling.model import Pod


@dataclass(frozen=True, slots=True)
class Attained:
    """GPU-seconds a job had run by ``at`` (seconds, the clock of ``Pod.started_at``)."""

    gpu_seconds: float
    at: float


def attained(kept: Attained | None, workers: Iterable[Pod], now: float) -> Attained:
    """The job's attained service at ``now``: ``kept`` plus what its running workers ran since.

    A worker counts while it runs (started, on a node, not terminating); one deleted after the record
    was written is not counted past its deletion. A record dated after ``now`` (a clock set back, or
    an annotation edited by hand) is taken as of ``now``: a date far ahead must not stop the counting.

    >>> from scheduling.model import Pod, Resources
    >>> w = Pod("u0", "ml", "w0", Resources(gpus=2), node_name="n1", phase="Running", started_at=100.0)
    >>> attained(None, [w], now=160.0)
    Attained(gpu_seconds=120.0, at=160.0)
    >>> attained(Attained(500.0, 150.0), [w], now=160.0)
    Attained(gpu_seconds=520.0, at=160.0)
    """
    total = kept.gpu_seconds if kept is not None else 0.0
    since = min(kept.at, now) if kept is not None else None
    for pod in workers:
        if pod.started_at is None or pod.terminating or not pod.holds_resources:
            continue
        start = pod.started_at if since is None else max(pod.started_at, since)
        total += pod.requests.gpus * max(0.0, now - start)
    return Attained(max(0.0, total), now)
