"""FIFO with first-fit placement and strict gangs: the simplest baseline, and a check on the loop.

Jobs start in arrival order (ties by name) and are never preempted. A job gets all its GPUs at once or
none (a strict gang), and the queue is strict: while the oldest waiting job does not fit, no job behind
it starts, so a big job is never starved by small ones (and GPUs idle meanwhile, which is the cost
FIFO is known for). First fit: the lowest-indexed node that holds the whole job; if none does, free GPUs
node by node from the lowest index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from simulator.loop import Allocation, ClusterView
from simulator.traces import TraceJob


@dataclass(frozen=True, slots=True)
class Fifo:
    """The policy; it keeps no state between decisions (running jobs keep their allocation)."""

    name: str = "fifo"

    def initial(self) -> None:
        """Nothing to remember."""
        return None

    def minimum_gpus(self, job: TraceJob) -> int:
        """A strict gang: every GPU it asked for."""
        return job.num_replicas

    def decide(self, state: None, view: ClusterView) -> tuple[None, Mapping[str, Allocation]]:
        """Keep running jobs where they are; start waiting ones in order until one does not fit."""
        allocations = {job.name: job.allocation for job in view.jobs if job.allocation}
        free = list(view.nodes)
        for allocation in allocations.values():
            for node in allocation:
                free[node] -= 1
        waiting = sorted(
            (job for job in view.jobs if not job.allocation), key=lambda j: (j.submitted, j.name)
        )
        for job in waiting:
            placed = first_fit(free, job.gpus)
            if placed is None:
                break
            allocations[job.name] = placed
        return None, allocations


def first_fit(free: list[int], gpus: int) -> Allocation | None:
    """GPUs for a whole gang, or None if the cluster has too few free; updates ``free`` when it places.

    >>> free = [1, 4, 4]
    >>> first_fit(free, 2), free
    ((1, 1), [1, 2, 4])
    >>> first_fit(free, 6), free
    ((0, 1, 1, 2, 2, 2), [0, 0, 1])
    >>> first_fit(free, 2) is None
    True
    """
    if sum(free) < gpus:
        return None
    whole = next((node for node, count in enumerate(free) if count >= gpus), None)
    if whole is not None:
        free[whole] -= gpus
        return (whole,) * gpus
    taken: list[int] = []
    for node, count in enumerate(free):
        take = min(count, gpus - len(taken))
        taken += [node] * take
        free[node] -= take
        if len(taken) == gpus:
            break
    return tuple(taken)
