"""Simulated training progress of MPIJobs, for the simulated kubelet.

The model, kept small and deterministic so that completion times can be predicted and compared:

- An MPIJob declares its work in the annotation ``phalanx.io/sim-work-gpu-seconds`` (a positive
  number of GPU-seconds). Without it the launcher runs until something else ends it (its own
  ``phalanx.io/sim-duration-seconds``, a deletion).
- The job's pods are the pods labelled ``training.kubeflow.org/job-name=<job>`` (the MPI Operator
  labels launcher and workers so). Work advances only while the launcher runs, at the job's **speed**:
  the GPUs of its Running pods times ``SPAN_EFFICIENCY ** (nodes - 1)``, where ``nodes`` is how many
  nodes those GPUs are on. So 8 GPUs on one node do 8 GPU-seconds of work per second, on two nodes
  7.2, on four 5.832: a job spread thinly finishes later, which is what consolidation must win back.
- A job may declare how it scales in ``phalanx.io/sim-scaling`` (an exponent in (0, 1], default 1): its
  speed is then ``gpus ** scaling`` times the span factor, so 0.3 is a job that gains little from more
  workers. It reports its speed as a real launcher would, through the annotation
  ``phalanx.io/throughput`` on its launcher pod (``kubeio.progress``): ``Training.report`` is that
  text, at 100 samples per GPU-second of work, with the workers running. Like a launcher, which
  measures its rate over a window, it reports a speed once the speed has held for
  ``REPORT_SETTLE_SECONDS`` (a job growing worker by worker is reported once, at the size it
  reached), and the kubelet writes every training's report every ``REPORT_SECONDS`` besides. A
  report wakes the job's operator (it watches the job's pods), which delays each wake-up of a job
  exponentially until one of its syncs succeeds: reports written on the MPIJob at every change of
  speed (one per worker starting) once put its next sync 20 s and more away.
- Speed is piecewise constant: it changes only when a pod of the job starts or stops running, and
  ``advance`` integrates it exactly between those moments. When the work done reaches the work
  declared, the launcher has succeeded (the kubelet reports it ``Succeeded``; the Job controller and
  the operator take it from there).

Nothing here talks to the API or reads a clock: the kubelet passes the time in and acts on the result.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping

WORK_ANNOTATION = "phalanx.io/sim-work-gpu-seconds"
"""MPIJob annotation: the job's work in GPU-seconds."""

REPORT_SETTLE_SECONDS = 2.0
"""How long a job's speed must hold before it is reported (a launcher's measuring window)."""

SPAN_EFFICIENCY = 0.9
"""Speed factor for each node a job's GPUs span beyond the first (communication across nodes)."""

SCALING_ANNOTATION = "phalanx.io/sim-scaling"
"""MPIJob annotation: the exponent of the job's speed in its GPUs (default 1: linear)."""

SAMPLES_PER_GPU_SECOND = 100.0
"""Samples a job reports per GPU-second of work (any unit would do: phalanx compares a job with itself)."""


def parse_work(text: object) -> float | None:
    """The work an annotation value declares, or None when it is missing or not a positive number."""
    if not isinstance(text, str):
        return None
    try:
        work = float(text)
    except ValueError:
        return None
    return work if work > 0 and math.isfinite(work) else None


def speed(gpus_by_node: Mapping[str, int], scaling: float = 1.0) -> float:
    """GPU-seconds of work per second for GPUs on these nodes (see the module's model)."""
    nodes = [gpus for gpus in gpus_by_node.values() if gpus > 0]
    if not nodes:
        return 0.0
    spread: float = SPAN_EFFICIENCY ** (len(nodes) - 1)
    return math.pow(sum(nodes), scaling) * spread


def parse_scaling(text: object) -> float:
    """The exponent an annotation value declares; 1 when it is missing or not a number in (0, 1]."""
    try:
        value = float(text) if isinstance(text, str) else 1.0
    except ValueError:
        return 1.0
    return value if 0 < value <= 1 else 1.0


@dataclasses.dataclass(frozen=True)
class JobPod:
    """A Running pod of an MPIJob, as the book counts it."""

    namespace: str
    job: str
    node: str
    gpus: int
    worker: bool = True


@dataclasses.dataclass
class Training:
    """One launcher's run: the work declared, the work done and the speed since ``since``."""

    namespace: str
    job: str
    launcher: str
    work: float
    done: float = 0.0
    speed: float = 0.0
    gpus: int = 0
    nodes: int = 0
    since: float = 0.0
    scaling: float = 1.0
    workers: int = 0
    changed_at: float | None = None
    """When its speed last changed, while that speed is not reported yet (``TrainingBook.settled``)."""

    def report(self) -> str | None:
        """The ``phalanx.io/throughput`` text the job writes now; None while it does not train."""
        if self.speed <= 0 or self.workers <= 0:
            return None
        rate = round(self.speed * SAMPLES_PER_GPU_SECOND, 3)
        return json.dumps({"samplesPerSecond": rate, "workers": self.workers}, separators=(",", ":"))

    def eta(self, now: float) -> float | None:
        """When the work will be done at the current speed (None while the job does not advance)."""
        if self.speed <= 0:
            return None
        return now + max(self.work - self.done, 0.0) / self.speed

    def describe(self) -> str:
        """One log line: where the job stands."""
        percent = 100.0 * min(self.done / self.work, 1.0)
        return (
            f"mpijob {self.namespace}/{self.job}: {self.gpus} GPUs on {self.nodes} node(s), "
            f"speed {self.speed:.2f} GPU-s/s, {self.done:.1f} of {self.work:g} GPU-s done ({percent:.0f}%)"
        )


class TrainingBook:
    """The Running pods of MPIJobs and the trainings of their launchers; not thread-safe."""

    def __init__(self) -> None:
        self._pods: dict[str, JobPod] = {}
        self._trainings: dict[str, Training] = {}  # launcher pod uid -> its training

    def pod_running(self, uid: str, pod: JobPod, now: float) -> list[Training]:
        """A pod of a job runs now; returns the trainings whose speed changed."""
        self.advance(now)
        self._pods[uid] = pod
        return self._respeed(pod.namespace, pod.job, now)

    def pod_gone(self, uid: str, now: float) -> list[Training]:
        """A pod stopped running (finished, deleted); returns the trainings whose speed changed."""
        pod = self._pods.pop(uid, None)
        self._trainings.pop(uid, None)
        if pod is None:
            return []
        self.advance(now)
        return self._respeed(pod.namespace, pod.job, now)

    def launcher_started(self, uid: str, training: Training, now: float) -> Training:
        """A job's launcher runs now with ``training.work`` to do; returns its training."""
        self.advance(now)
        self._trainings[uid] = training
        self._respeed(training.namespace, training.job, now)
        return training

    def advance(self, now: float) -> None:
        """Add the work done up to ``now`` at the speeds in effect since the last change."""
        for training in self._trainings.values():
            if now > training.since:
                training.done += training.speed * (now - training.since)
                training.since = now

    def take_finished(self, now: float) -> list[tuple[str, Training]]:
        """Advance to ``now``; remove and return (launcher uid, training) of the trainings done."""
        self.advance(now)
        finished = [(uid, t) for uid, t in self._trainings.items() if t.done >= t.work - 1e-9]
        for uid, _ in finished:
            del self._trainings[uid]
        return finished

    def next_finish(self, now: float) -> float | None:
        """The earliest moment a training will finish at the current speeds."""
        etas = [eta for t in self._trainings.values() if (eta := t.eta(now)) is not None]
        return min(etas, default=None)

    def settled(self, now: float) -> list[Training]:
        """The trainings whose speed changed and has held ``REPORT_SETTLE_SECONDS`` since: report them now.

        Each is returned once per change (its pending change is taken), by namespace, job and launcher.
        """
        due = [
            t
            for t in self.trainings()
            if t.changed_at is not None and now - t.changed_at >= REPORT_SETTLE_SECONDS
        ]
        for training in due:
            training.changed_at = None
        return due

    def next_settled(self) -> float | None:
        """When the earliest pending change of speed will have held long enough to be reported."""
        pending = [t.changed_at for t in self._trainings.values() if t.changed_at is not None]
        return min(pending) + REPORT_SETTLE_SECONDS if pending else None

    def trainings(self) -> list[Training]:
        """Every training under way, by namespace, job and launcher."""
        return sorted(self._trainings.values(), key=lambda t: (t.namespace, t.job, t.launcher))

    def _respeed(self, namespace: str, job: str, now: float) -> list[Training]:
        gpus_by_node: dict[str, int] = {}
        workers = 0
        for pod in self._pods.values():
            if pod.namespace == namespace and pod.job == job:
                gpus_by_node[pod.node] = gpus_by_node.get(pod.node, 0) + pod.gpus
                workers += pod.worker
        changed = []
        for training in self._trainings.values():
            if training.namespace != namespace or training.job != job:
                continue
            new = speed(gpus_by_node, training.scaling)
            nodes = sum(1 for gpus in gpus_by_node.values() if gpus > 0)
            if (new, nodes, workers) != (training.speed, training.nodes, training.workers):
                changed.append(training)
                training.changed_at = now
            training.since = now
            training.speed = new
            training.gpus = sum(gpus_by_node.values())
            training.nodes = nodes
            training.workers = workers
        return changed
