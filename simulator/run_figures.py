"""The figures of every run, computed alike for every policy from what the loop recorded.

Definitions (the table's columns):

- **JCT**: completion less arrival; average, p50, p99 (numpy's linear interpolation).
- **Queueing delay**: first decision that gave the job GPUs, less arrival; average and p99.
- **Makespan**: last completion less first arrival.
- **GPU allocation while jobs wait**: over the decisions after which at least one active job held no
  GPU, the mean share of the cluster's GPUs held by jobs (the idle GPUs a queue could have used).
- **Partial gangs**: jobs that were ever given fewer GPUs than the policy's own minimum for them.
- **Resizes / moves**: allocation changes to another GPU count, or to other nodes at the same count.
- **Compact**: of the multi-GPU jobs, the share that held their GPUs on the fewest nodes that can hold
  them at every decision (one node for a job that fits one; the Pollux nodes are PCIe-only, so "one
  node" is the best-connected set there is).
- **NVLink**: of the multi-GPU jobs that were ever placed where a fully NVLink-connected set of a node
  part's size existed among the GPUs the other jobs left free, the share whose every such part was one
  (``simulator.gpu_sets``; ``-`` on nodes without a topology document, where the question does not arise).
- **Jain's index** (with queues): at each decision where the active jobs ask for more GPUs than the
  cluster has, ``x_q = held_q / fair_share_q`` over the queues with a positive fair share (the core's
  ``fair_shares`` of the cluster for that decision's demand), ``(sum x)^2 / (n sum x^2)``; averaged over
  those decisions. 1 is every queue at its fair share.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from scheduling.model import Resources
from scheduling.queues import Queue, QueueTree, fair_shares
from simulator.results import RunResult, StepRecord


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    """One policy's row of the table (seconds and shares; ``None`` where a figure has no data)."""

    policy: str
    jobs: int
    unfinished: int
    avg_jct_s: float | None
    p50_jct_s: float | None
    p99_jct_s: float | None
    avg_queueing_s: float | None
    p99_queueing_s: float | None
    makespan_s: int | None
    allocation_while_waiting: float | None
    partial_gangs: int
    resizes: int
    moves: int
    preemptions: int
    compact_share: float | None
    nvlink_share: float | None = None
    nvlink_jobs: int = 0
    jain_index: float | None


def figures(result: RunResult, queues: Sequence[Queue] = ()) -> Figures:
    """The row of ``result`` (``queues``: the Queue objects the run used, for Jain's index)."""
    jobs = result.jobs
    jcts = [job.jct for job in jobs]
    delays = [job.queueing_delay for job in jobs]
    multi = [job.compact for job in jobs if job.compact is not None]
    linked = [job.nvlink for job in jobs if job.nvlink is not None and job.gpus > 1]
    waiting = [r.allocated / result.capacity for r in result.timeline if r.waiting and result.capacity]
    return Figures(
        policy=result.policy,
        jobs=len(jobs),
        unfinished=len(result.unfinished),
        avg_jct_s=float(np.mean(jcts)) if jcts else None,
        p50_jct_s=float(np.percentile(jcts, 50)) if jcts else None,
        p99_jct_s=float(np.percentile(jcts, 99)) if jcts else None,
        avg_queueing_s=float(np.mean(delays)) if delays else None,
        p99_queueing_s=float(np.percentile(delays, 99)) if delays else None,
        makespan_s=max(j.completed for j in jobs) - min(j.submitted for j in jobs) if jobs else None,
        allocation_while_waiting=float(np.mean(waiting)) if waiting else None,
        partial_gangs=sum(1 for job in jobs if job.partial),
        resizes=sum(job.resizes for job in jobs),
        moves=sum(job.moves for job in jobs),
        preemptions=sum(job.preemptions for job in jobs),
        compact_share=sum(multi) / len(multi) if multi else None,
        nvlink_share=sum(linked) / len(linked) if linked else None,
        nvlink_jobs=len(linked),
        jain_index=jain(result.timeline, queues, result.capacity) if queues else None,
    )


def jain(timeline: Sequence[StepRecord], queues: Sequence[Queue], capacity: int) -> float | None:
    """Mean Jain's index of held / fair share over the decisions where demand exceeded the cluster."""
    tree = QueueTree.build(queues)
    indices = []
    for record in timeline:
        if sum(record.demand.values()) <= capacity:
            continue
        demand = {q: Resources(gpus=g) for q, g in record.demand.items()}
        shares = fair_shares(tree, Resources(gpus=capacity), demand)
        ratios = [
            record.held.get(q, 0) / shares[q].fair_share.gpus
            for q in sorted(record.demand)
            if shares[q].fair_share.gpus > 0
        ]
        if ratios:
            total = sum(ratios)
            squares = sum(r * r for r in ratios)
            indices.append(total * total / (len(ratios) * squares) if squares else 1.0)
    return float(np.mean(indices)) if indices else None
