"""How a job sets its total batch on the GPUs it holds: fixed, scaled with its workers, or tuned.

A trace row gives a job's batch at the GPUs it asked for (``num_replicas``). What the job does with
its batch when a scheduler gives it another number of GPUs is the job's own code, not the scheduler's,
so the simulator models it as the job's behaviour (``--batch``), the same under every policy:

- ``fixed``: the row's total batch, split over whatever GPUs the job holds (gradient accumulation
  when one GPU's share is too large). The Pollux artifact's non-adaptive jobs; the published Tiresias
  and Optimus figures were made this way.
- ``scaled``: the per-worker batch is kept (the row's batch over its ``num_replicas``), so the total
  batch grows and shrinks with the workers, within the application's validated batches. This is what
  an elastic Horovod script does: Horovod's elastic API example rescales the learning rate by
  ``hvd.size()`` in ``on_state_reset`` because "effective batch size in synchronous distributed
  training is scaled by the number of workers" (Horovod docs, Elastic Horovod and the Keras guide). It
  is the job ``docs/elastic-mpijobs.md`` documents, and the one ``scheduling/elastic/throughput.py``
  models (a fixed per-worker batch).
- ``tuned``: at every epoch the job picks the total batch and per-GPU split with the highest goodput
  (throughput times statistical efficiency) on its placement, within the validated batches. This is
  what AdaptDL's data loader does from its own gradient statistics, so it is the job Pollux's published
  figures were made with.

A rigid job always runs on the GPUs it asked for, where ``fixed`` and ``scaled`` are the same batch;
``tuned`` changes every policy's jobs, rigid ones included (their code tunes whatever they are given).
"""

from __future__ import annotations

import math
from enum import Enum

import numpy as np

from simulator.traces import TraceJob

# ``tuned`` searches per-GPU batches on a geometric grid of this many points between the application's
# smallest and largest measured per-GPU batch, and these accumulation steps (0: none), as AdaptDL's
# optimizer searches a grid rather than solving in closed form (the step time is interpolated data).
TUNED_GRID_POINTS = 24
TUNED_MAX_ACCUMULATION_STEPS = 15


class JobBatch(Enum):
    """What a job does with its batch when its GPUs change (see the module docstring)."""

    FIXED = "fixed"
    SCALED = "scaled"
    TUNED = "tuned"


def scaled_total(job: TraceJob, replicas: int, smallest: int, largest: int) -> int:
    """The total batch of ``job`` on ``replicas`` GPUs when its per-worker batch is kept.

    Args:
        job: the trace row; its batch is the total at ``num_replicas`` GPUs.
        replicas: GPUs the job holds now.
        smallest: the application's smallest validated total batch.
        largest: the application's largest validated total batch.

    Returns:
        ``replicas`` times the per-worker batch, rounded, within ``[smallest, largest]``; exactly the
        row's batch at ``num_replicas`` GPUs.
    """
    if replicas == job.num_replicas:
        return job.batch_size
    total = round(replicas * job.batch_size / job.num_replicas)
    return min(max(total, smallest), largest)


def tuned_grid(min_local: int, max_local: int) -> tuple[int, ...]:
    """Per-GPU batches ``tuned`` tries: a geometric grid from ``min_local`` to ``max_local``, as ints."""
    if max_local <= min_local:
        return (min_local,)
    points = np.geomspace(min_local, max_local, TUNED_GRID_POINTS)
    return tuple(sorted({min(max_local, max(min_local, math.floor(p + 0.5))) for p in points}))
