"""How fast a job trains on the GPUs it holds: the Pollux speed model, and the protocol it fills.

The Pollux artifact (``petuum/adaptdl`` branch ``osdi21-artifact``, ``simulator/applications.py`` and
``simulator/simulator.py``) measured six applications on T4 nodes with 4 GPUs each. Its facts, which
this module reproduces from the data in ``simulator/data/pollux/`` (our own code, not theirs):

- **Step time** of one application depends on the placement (GPUs per node, in allocation order) and
  the per-GPU ("atomic") batch size. A placement that was measured (``placements.csv``, keyed by the
  lexicographically smallest rotation of the placement, so 4+2 and 2+4 are one measurement) is
  interpolated linearly in the batch size; any other placement is interpolated linearly over
  (nodes, GPUs, batch size) through the node-count means of the measured placements plus the
  scaling runs (``scalability.csv``), with nodes capped at 16.
- **Work** is counted in the artifact's "progress": iterations at the application's smallest validated
  batch size, so a larger batch advances faster only as far as its statistical efficiency allows
  (``gain = (var + sqr) / (var / scale + sqr)``, from the gradient statistics measured per epoch and
  batch size in ``validation-<batch>.csv``). A job is done when it has passed its last epoch
  (the artifact's ``max_epochs`` per application; no target metric is used).
- Time advances in whole seconds at epoch boundaries (the artifact rounds the time to the boundary),
  so JCTs are integers, as in the published results.

What a job does with its batch on other GPUs than it asked for is the job's (``simulator/batch.py``:
fixed, scaled with its workers, or tuned for goodput). A total batch is split over the GPUs as the
artifact splits it: per-GPU share rounded up, gradient accumulation when the share exceeds the largest
measured per-GPU batch, at least one accumulation step for a single GPU above the smallest batch, and
the result capped so that the total never passes the largest validated batch.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.interpolate import LinearNDInterpolator

from simulator.batch import TUNED_MAX_ACCUMULATION_STEPS, JobBatch, scaled_total, tuned_grid
from simulator.traces import TraceJob

Placement = tuple[int, ...]
"""GPUs a job holds on each node it spans, in allocation order, without zeros: (4, 2) is 6 GPUs on 2 nodes."""

POLLUX_DATA = Path(__file__).resolve().parent / "data" / "pollux"

# Per-application settings of the artifact's ``APPLICATIONS`` table (``applications.py``): how many epochs
# a job trains, and the one override of the largest per-GPU batch (yolov3 measured up to 8 per GPU).
_EPOCHS: Mapping[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "deepspeech2": 80,
    "imagenet": 90,
    "ncf": 10,
    "yolov3": 50,
}
_MAX_LOCAL_BATCH: Mapping[str, int] = {"yolov3": 8}

# The artifact caps the node count at 16 before interpolating over unmeasured placements.
_MAX_INTERPOLATED_NODES = 16


class SpeedError(ValueError):
    """A job asked for a speed the model has no data for (unknown application, batch or placement)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a job has trained: completed epochs, and work done in the model's units."""

    epoch: int = 0
    work: float = 0.0


@dataclass(frozen=True, slots=True)
class Advance:
    """A job's progress after some seconds on a placement, and when inside them it finished, if it did.

    ``samples_per_second`` is the throughput the job trained at (its batch over its step time): what its
    launcher reports, and all a learning policy may see of the speed model (0: the model has no
    notion of samples).
    """

    progress: Progress
    finished_after: int | None
    samples_per_second: float = 0.0


class SpeedModel(Protocol):
    """What the loop asks of a speed model: move a job forward by some seconds on a placement.

    The model owns the units of work; the loop only keeps the ``Progress`` value it returns.
    """

    def check(self, job: TraceJob) -> None:
        """Raise ``SpeedError`` now if the job can never be simulated (before the run starts)."""
        ...

    def advance(self, job: TraceJob, progress: Progress, placement: Placement, seconds: int) -> Advance:
        """Train ``job`` from ``progress`` for ``seconds`` on ``placement`` (never empty)."""
        ...

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        """Work left before the job completes, in the model's units."""
        ...


@dataclass(frozen=True, slots=True)
class _Step:
    """One optimizer step of a job: the total batch it sees and its seconds (accumulation included)."""

    batch: int
    seconds: float

    @property
    def rate(self) -> float:
        """Samples a second: what the job's launcher reports."""
        return self.batch / self.seconds


@dataclass(frozen=True, slots=True)
class Curve:
    """One validation run of an application at one total batch size.

    Per epoch: cumulative progress at its end, and the gradient statistics measured during it.
    """

    batch_size: int
    progress: tuple[float, ...]
    grad_sqr: tuple[float, ...]
    grad_var: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class BatchSplit:
    """How a total batch is run on some GPUs: per-GPU batch and gradient-accumulation steps."""

    atomic: int
    accumulation_steps: int

    def total(self, replicas: int) -> int:
        """The batch one optimizer step really sees."""
        return replicas * self.atomic * (self.accumulation_steps + 1)


@dataclass(frozen=True, eq=False)
class ApplicationProfile:
    """Everything measured about one application (eq is identity, so it can key a memo)."""

    name: str
    epochs: int
    curves: tuple[Curve, ...]
    measured: Mapping[Placement, tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]]
    points: NDArray[np.float64]
    times: NDArray[np.float64]
    min_local_batch: int
    max_local_batch: int

    @property
    def init_batch_size(self) -> int:
        """The smallest validated batch: the unit of progress."""
        return self.curves[0].batch_size

    @property
    def max_batch_size(self) -> int:
        """The largest validated batch: no job may train beyond it."""
        return self.curves[-1].batch_size

    @cached_property
    def _interpolator(self) -> LinearNDInterpolator:
        return LinearNDInterpolator(self.points, self.times)

    def progress_at(self, epoch: int) -> float:
        """Progress at the end of ``epoch`` epochs: the least any validation run needed (artifact's rule)."""
        if epoch == 0:
            return 0.0
        return min(curve.progress[epoch - 1] for curve in self.curves)

    @property
    def total_work(self) -> float:
        """Progress a job has made when it completes."""
        return self.progress_at(self.epochs)

    def split(self, replicas: int, batch_size: int) -> BatchSplit:
        """Split a fixed total batch over ``replicas`` GPUs as the artifact does (see the module doc)."""
        local = math.ceil(batch_size / replicas - 1e-8)
        steps = math.ceil(local / self.max_local_batch - 1e-8) - 1
        if replicas == 1 and batch_size > self.init_batch_size:
            steps = max(1, steps)
        atomic = math.ceil(local / (steps + 1) - 1e-8)
        atomic = min(atomic, int(self.max_batch_size / (replicas * (steps + 1))))
        return BatchSplit(atomic, steps)

    def gain(self, batch_size: int, epoch: int) -> float:
        """Progress one step at ``batch_size`` makes during ``epoch``, in steps at the smallest batch.

        Pollux's statistical efficiency: ``(var + sqr) / (var / scale + sqr)``, ``scale`` the batch over
        the smallest validated one (1 at the smallest batch; less than ``scale`` as the noise falls).
        """
        sqr, var = self.grad_stats(batch_size, epoch)
        return (var + sqr) / (var / (batch_size / self.init_batch_size) + sqr)

    def grad_stats(self, batch_size: int, epoch: int) -> tuple[float, float]:
        """Gradient square norm and variance during ``epoch``, linear between validated batches."""
        lower, upper = self._bracket(batch_size)
        if lower is upper:
            return lower.grad_sqr[epoch], lower.grad_var[epoch]
        low, high = lower.batch_size, upper.batch_size
        # Weighted as the artifact weighs the two ends, so the floats agree to the last bit.
        sqr = ((batch_size - low) * upper.grad_sqr[epoch] + (high - batch_size) * lower.grad_sqr[epoch]) / (
            high - low
        )
        var = ((batch_size - low) * upper.grad_var[epoch] + (high - batch_size) * lower.grad_var[epoch]) / (
            high - low
        )
        return sqr, var

    def _bracket(self, batch_size: int) -> tuple[Curve, Curve]:
        lower = next((c for c in reversed(self.curves) if c.batch_size <= batch_size), None)
        upper = next((c for c in self.curves if c.batch_size >= batch_size), None)
        if lower is None or upper is None:
            sizes = [c.batch_size for c in self.curves]
            msg = f"{self.name}: batch {batch_size} outside the validated batches {sizes}"
            raise SpeedError(msg)
        return lower, upper

    def step_time(self, placement: Placement, atomic: int) -> tuple[float, float]:
        """Seconds per step and the part of it spent synchronizing, on ``placement`` at ``atomic`` per GPU."""
        key = canonical(placement)
        measured = self.measured.get(key)
        if measured is not None:
            batches, step, sync = measured
            if not batches[0] <= atomic <= batches[-1]:
                msg = (
                    f"{self.name}: per-GPU batch {atomic} outside the measured"
                    f" {batches[0]:g}..{batches[-1]:g} for placement {key}"
                )
                raise SpeedError(msg)
            return float(np.interp(atomic, batches, step)), float(np.interp(atomic, batches, sync))
        nodes = min(len(key), _MAX_INTERPOLATED_NODES)
        step_sync = self._interpolator([nodes, sum(key), atomic])[0]
        if np.isnan(step_sync).any():
            msg = f"{self.name}: no measurement around placement {key} at per-GPU batch {atomic}"
            raise SpeedError(msg)
        return float(step_sync[0]), float(step_sync[1])


def canonical(placement: Placement) -> Placement:
    """The smallest rotation of a placement without zeros: the key the artifact measured it under."""
    parts = tuple(count for count in placement if count)
    if not parts:
        msg = "an empty placement has no speed"
        raise SpeedError(msg)
    return min(parts[i:] + parts[:i] for i in range(len(parts)))


class PolluxSpeed:
    """The Pollux artifact's speed model (see the module doc); ``batch`` is what jobs do with their batch.

    Step times are memoized per (application, placement, per-GPU batch), and ``tuned`` splits per
    (application, placement, epoch); the memos are caches of pure functions, so the model behaves as a
    value.
    """

    def __init__(self, profiles: Mapping[str, ApplicationProfile], batch: JobBatch = JobBatch.FIXED) -> None:
        self._profiles = dict(profiles)
        self._batch = batch
        self._step_times: dict[tuple[str, Placement, int], tuple[float, float]] = {}
        self._tuned: dict[tuple[str, Placement, int], _Step | None] = {}

    @classmethod
    def load(cls, root: Path = POLLUX_DATA, batch: JobBatch = JobBatch.FIXED) -> PolluxSpeed:
        """Read the six measured applications from ``root`` (``simulator/data/pollux`` by default).

        ``batch`` is what every job does with its batch when its GPUs change (``simulator/batch.py``).
        """
        return cls({name: load_profile(root / name, name) for name in sorted(_EPOCHS)}, batch)

    def profile(self, application: str) -> ApplicationProfile:
        """The measurements of one application."""
        try:
            return self._profiles[application]
        except KeyError:
            known = ", ".join(sorted(self._profiles))
            msg = f"unknown application {application!r} (known: {known})"
            raise SpeedError(msg) from None

    def check(self, job: TraceJob) -> None:
        """Refuse a job whose application or batch has no data, before any time is simulated."""
        app = self.profile(job.application)
        app._bracket(job.batch_size)

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        """Progress units left, at the application's smallest batch."""
        return self.profile(job.application).total_work - progress.work

    def advance(self, job: TraceJob, progress: Progress, placement: Placement, seconds: int) -> Advance:
        """Train for ``seconds``; epochs change the statistical efficiency, so walk epoch by epoch."""
        app = self.profile(job.application)
        epoch, work, elapsed, left = progress.epoch, progress.work, 0, seconds
        step = trained = self._step(app, job, placement, epoch)  # trained: the step of the last epoch run
        while left > 0:
            trained = step
            goodput = app.gain(step.batch, epoch) / step.seconds
            boundary = app.progress_at(epoch + 1)
            if work + goodput * left < boundary:
                return Advance(Progress(epoch, work + goodput * left), None, step.rate)
            delta = round((boundary - work) / goodput)
            epoch, work, elapsed, left = epoch + 1, boundary, elapsed + delta, left - delta
            if epoch >= app.epochs:
                return Advance(Progress(epoch, work), elapsed, step.rate)
            step = self._step(app, job, placement, epoch)
        return Advance(Progress(epoch, work), None, trained.rate)

    def _step(self, app: ApplicationProfile, job: TraceJob, placement: Placement, epoch: int) -> _Step:
        """The batch one optimizer step sees on ``placement`` during ``epoch``, and the step's seconds."""
        replicas = sum(placement)
        if self._batch is JobBatch.TUNED:
            key = (app.name, canonical(placement), epoch)
            if key not in self._tuned:
                self._tuned[key] = self._tune(app, placement, epoch)
            tuned = self._tuned[key]
            if tuned is not None:
                return tuned
        total = job.batch_size
        if self._batch is JobBatch.SCALED:
            total = scaled_total(job, replicas, app.init_batch_size, app.max_batch_size)
        split = app.split(replicas, total)
        step, sync = self._step_time(app, placement, split.atomic)
        return _Step(split.total(replicas), step + (step - sync) * split.accumulation_steps)

    def _tune(self, app: ApplicationProfile, placement: Placement, epoch: int) -> _Step | None:
        """The split with the highest goodput on ``placement`` in ``epoch`` (None: no split fits)."""
        replicas = sum(placement)
        best: tuple[float, _Step] | None = None
        for steps in range(TUNED_MAX_ACCUMULATION_STEPS + 1):
            for atomic in tuned_grid(app.min_local_batch, app.max_local_batch):
                total = replicas * atomic * (steps + 1)
                if not app.init_batch_size <= total <= app.max_batch_size:
                    continue
                try:
                    step, sync = self._step_time(app, placement, atomic)
                except SpeedError:  # a per-GPU batch this placement was not measured at
                    continue
                candidate = _Step(total, step + (step - sync) * steps)
                goodput = app.gain(total, epoch) / candidate.seconds
                if best is None or goodput > best[0]:
                    best = (goodput, candidate)
        return None if best is None else best[1]

    def _step_time(self, app: ApplicationProfile, placement: Placement, atomic: int) -> tuple[float, float]:
        key = (app.name, canonical(placement), atomic)
        cached = self._step_times.get(key)
        if cached is None:
            cached = self._step_times[key] = app.step_time(placement, atomic)
        return cached


def load_profile(directory: Path, name: str) -> ApplicationProfile:
    """Read one application's ``placements.csv``, ``scalability.csv`` and ``validation-<batch>.csv``."""
    curves = sorted(
        (_read_curve(path) for path in directory.glob("validation-*.csv")), key=lambda c: c.batch_size
    )
    if not curves:
        msg = f"{directory}: no validation-<batch>.csv"
        raise SpeedError(msg)
    placements = _read_table(
        directory / "placements.csv", ("placement", "local_bsz", "step_time", "sync_time")
    )
    scalability = _read_table(
        directory / "scalability.csv", ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
    )
    by_placement: dict[Placement, list[tuple[float, float, float]]] = {}
    by_shape: dict[tuple[int, int, float], list[tuple[float, float]]] = {}
    for placement_text, local, step, sync in placements:
        placement = tuple(int(digit) for digit in placement_text)
        by_placement.setdefault(placement, []).append((float(local), float(step), float(sync)))
        shape = (len(placement), sum(placement), float(local))
        by_shape.setdefault(shape, []).append((float(step), float(sync)))
    measured = {}
    for placement, rows in by_placement.items():
        table = np.array(sorted(rows), dtype=np.float64)
        measured[placement] = (table[:, 0], table[:, 1], table[:, 2])
    # Points in the artifact's order: node-count means sorted by (nodes, GPUs, batch), then the scaling runs.
    points = [list(shape) for shape in sorted(by_shape)]
    times = [list(np.mean(np.array(by_shape[shape]), axis=0)) for shape in sorted(by_shape)]
    for nodes, replicas, local, step, sync in scalability:
        points.append([float(nodes), float(replicas), float(local)])
        times.append([float(step), float(sync)])
    local_batches = [int(float(row[1])) for row in placements]
    epochs = _EPOCHS.get(name, min(len(curve.progress) for curve in curves))
    if any(len(curve.progress) < epochs for curve in curves):
        msg = f"{directory}: a validation run has fewer than {epochs} epochs"
        raise SpeedError(msg)
    return ApplicationProfile(
        name=name,
        epochs=epochs,
        curves=tuple(curves),
        measured=measured,
        points=np.array(points, dtype=np.float64),
        times=np.array(times, dtype=np.float64),
        min_local_batch=min(local_batches),
        max_local_batch=_MAX_LOCAL_BATCH.get(name, max(local_batches)),
    )


def _read_curve(path: Path) -> Curve:
    batch = int(path.stem.rsplit("-", 1)[1])
    rows = _read_table(path, ("progress", "grad_sqr", "grad_var"))
    return Curve(
        batch_size=batch,
        progress=tuple(float(r[0]) for r in rows),
        grad_sqr=tuple(float(r[1]) for r in rows),
        grad_var=tuple(float(r[2]) for r in rows),
    )


def _read_table(path: Path, columns: Sequence[str]) -> list[tuple[str, ...]]:
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            msg = f"{path}: missing columns {missing}"
            raise SpeedError(msg)
        return [tuple(row[c] for c in columns) for row in reader]
