"""How fast an elastic job trains at each size, learned from what it reported at the sizes it ran.

The form is Pollux's performance model (Qiao et al., OSDI'21) narrowed to what an MPIJob's workers
have: a fixed per-worker batch, so only the step time varies with the placement. The time of one
step per worker is compute plus synchronisation, added (no overlap: the pessimistic end of Pollux's
``gamma``):

    t(K, N) = c + net(K, N)
    net(1, 1) = 0;  net(K, 1) = a_r + b_r * (K - 2);  net(K, N > 1) = a_n + b_n * (K - 2)

with all parameters >= 0 (ring all-reduce over ``K`` workers: a fixed cost over the slowest link,
intra-node ``r`` or inter-node ``n``, and a retrogression that grows with the ring). Throughput is
``K / t(K, N)`` in the job's own units (samples per second, as it reports them), and the *speedup*
``s(K, N) = K * c / t(K, N)`` is relative to one worker; with every parameter >= 0 it is at most
``K``: the model never promises more than linear scaling (Optimus's convex form makes the same
promise).

The fit is non-negative least squares on the observed per-worker step times ``K / X``, with a ridge
that pulls every synchronisation parameter toward 0 (the prior: linear scaling), so that a job never
seen at a size is predicted as optimistically as Pollux's model predicts it and a job seen at one size
only is linear through that size. Parameters of a regime never observed are not fitted: inter-node
costs are at least the intra-node ones (spreading is never predicted free before it was measured).
Samples are few (one per size and spread a job has run at), so this is a 5-row solve.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

RIDGE = 0.05
"""Weight of the prior (no synchronisation cost) against the observations, relative to ``c``."""

SPREAD_TOLERANCE = 0.05
"""The share of its speedup a job may lose to spreading over one more node and still count it free."""


@dataclass(frozen=True, slots=True, order=True)
class Sample:
    """One observation: the job ran ``workers`` workers on ``nodes`` nodes and made ``rate`` progress/s.

    Attributes:
        workers: workers that ran.
        nodes: nodes they spanned.
        rate: progress per second in the job's own units (samples/s), averaged over the observation.
    """

    workers: int
    nodes: int
    rate: float


@dataclass(frozen=True, slots=True)
class Throughput:
    """A fitted model of one job (see the module docstring).

    Attributes:
        compute: ``c``, per-worker step time of one worker alone (in 1/rate units).
        intra: ``(a_r, b_r)``.
        inter: ``(a_n, b_n)``.
        samples: how many observations it was fitted on (0: the prior).
        spread: relative root-mean-square error of the fit on its samples (0 with one sample or none):
            how far to trust its predictions.
        across_nodes: whether a sample ran on more than one node: only then may its inter-node costs
            say that spreading is free (``spreads_free``).
    """

    compute: float = 1.0
    intra: tuple[float, float] = (0.0, 0.0)
    inter: tuple[float, float] = (0.0, 0.0)
    samples: int = 0
    spread: float = 0.0
    across_nodes: bool = False

    def step_time(self, workers: int, nodes: int = 1) -> float:
        """Per-worker step time at ``workers`` on ``nodes``."""
        if workers <= 1:
            return self.compute
        a, b = self.inter if nodes > 1 else self.intra
        return self.compute + a + b * max(workers - 2, 0)

    def rate(self, workers: int, nodes: int = 1) -> float:
        """Predicted progress per second."""
        return 0.0 if workers <= 0 else workers / self.step_time(workers, nodes)

    def speedup(self, workers: int, nodes: int = 1) -> float:
        """Predicted rate relative to one worker alone: at most ``workers``."""
        return 0.0 if workers <= 0 else workers * self.compute / self.step_time(workers, nodes)

    def spreads_free(self, workers: int, fewest: int) -> bool:
        """Whether ``workers`` on more nodes than ``fewest`` train as fast, as measured (never by the prior).

        A job never seen across nodes is predicted no slower spread (its inter-node costs are only
        bounded by the intra-node ones), which is no measurement: compact is the default until one says
        otherwise. Measured, spreading is free when it costs at most ``SPREAD_TOLERANCE`` of the speedup.
        """
        if not self.across_nodes or workers <= 1:
            return False
        compact = self.speedup(workers, max(fewest, 1))
        return self.speedup(workers, max(fewest, 1) + 1) >= (1.0 - SPREAD_TOLERANCE) * compact

    def describe(self, workers: int, nodes: int = 1) -> str:
        """The model's figures in words, for events and ``phalanx why``."""
        basis = (
            f"fitted on {self.samples} sample{'s' if self.samples != 1 else ''}"
            if self.samples
            else "no throughput reported yet: linear scaling assumed"
        )
        return (
            f"predicted speedup {self.speedup(workers, nodes):.2f}x at {workers} worker"
            f"{'s' if workers != 1 else ''} on {nodes} node{'s' if nodes != 1 else ''} ({basis}"
            f"{f', error {self.spread:.0%}' if self.samples > 1 else ''})"
        )


PRIOR = Throughput()
"""A job never observed: linear scaling."""


def fit(samples: Iterable[Sample]) -> Throughput:
    """The model that best explains ``samples`` (the prior when there are none).

    Samples at the same size and spread are averaged first (one figure per configuration), so a job
    that reports often at one size does not drown the sizes it reported once.

    >>> model = fit([Sample(1, 1, 10.0), Sample(4, 1, 20.0)])
    >>> round(model.speedup(4), 2), model.speedup(4) <= 4
    (2.0, True)
    """
    points = _averaged(samples)
    if not points:
        return PRIOR
    seen_intra = any(k > 1 and n == 1 for k, n, _ in points)
    scale = float(np.median([k / x for k, _, x in points]))
    rows, target = [], []
    for k, n, x in points:  # columns: c, a_r, b_r, and what crossing nodes adds to each: d_a, d_b
        ring = float(max(k - 2, 0))
        rows.append(
            [1.0, 1.0, ring, 1.0, ring] if n > 1 else [1.0, float(k > 1), ring if k > 1 else 0.0, 0.0, 0.0]
        )
        target.append(k / x)
    for col in range(1, 5):  # the prior: no synchronisation cost, weighed lightly
        row = [0.0] * 5
        row[col] = RIDGE
        rows.append(row)
        target.append(0.0)
    solution, _ = nnls(np.array(rows), np.array(target) / scale)
    c, ar, br, da, db = (float(v) * scale for v in solution)
    an, bn = ar + da, br + db
    if not seen_intra:  # what inter-node rows taught says nothing of one node: optimistic there
        ar, br = 0.0, 0.0
    c = max(c, 1e-12)
    model = Throughput(c, (ar, br), (an, bn), len(points))
    across = any(n > 1 for _, n, _ in points)
    return Throughput(c, (ar, br), (an, bn), len(points), _error(model, points), across)


def _averaged(samples: Iterable[Sample]) -> list[tuple[int, int, float]]:
    """(workers, nodes, mean rate) per configuration with a positive rate, in order."""
    sums: dict[tuple[int, int], list[float]] = {}
    for s in samples:
        if s.workers >= 1 and s.nodes >= 1 and s.rate > 0 and math.isfinite(s.rate):
            sums.setdefault((s.workers, min(s.nodes, s.workers)), []).append(s.rate)
    return [(k, n, sum(v) / len(v)) for (k, n), v in sorted(sums.items())]


def _error(model: Throughput, points: Sequence[tuple[int, int, float]]) -> float:
    if len(points) < 2:
        return 0.0
    errs = [(model.rate(k, n) - x) / x for k, n, x in points]
    return math.sqrt(sum(e * e for e in errs) / len(errs))


def fit_all(samples: Mapping[str, Iterable[Sample]]) -> dict[str, Throughput]:
    """One model per job, by key."""
    return {key: fit(s) for key, s in sorted(samples.items())}
