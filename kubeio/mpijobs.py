"""Kubeflow MPIJobs (``kubeflow.org/v2beta1``, MPI Operator v0.7.0) as the elastic planner needs them.

What is read (docs/design/elastic-mpi.md): the workers' count ``spec.mpiReplicaSpecs.Worker.replicas``, the
minimum ``spec.runPolicy.schedulingPolicy.minAvailable`` (launcher included, as the operator counts
it for its PodGroup), the maximum from the annotation ``phalanx.io/max-workers`` (the API has no field
for it), a worker's requests from the Worker template, and its queue from the template's label
``phalanx.io/queue``. Its pods are found by the operator's labels (``kubeio.mpijob_pods``). What is
written: the replicas (there is no scale subresource), by a merge patch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubeio.attained import ATTAINED_ANNOTATION, parse_attained, render_attained
from kubeio.convert import ConvertError, api_parts, pod_from_api, pod_requests
from kubeio.errors import NotFoundError
from kubeio.events import ObjectRef
from kubeio.http import JsonObject, KubeHttp
from kubeio.mpijob_pods import JOB_NAME_LABEL, ROLE_LABEL, replica_index, workers_of
from kubeio.progress import SAMPLES_ANNOTATION, THROUGHPUT_ANNOTATION
from kubeio.refusals import identity
from scheduling.elastic import ElasticJob, check_job
from scheduling.elastic.attained import Attained
from scheduling.elastic.job import MAX_WORKERS_ANNOTATION, WorkerRange
from scheduling.elastic.operator_lag import OperatorCount
from scheduling.model import KUEUE_QUEUE_LABEL, Pod, Resources
from scheduling.queues import QUEUE_LABEL

API_VERSION = "kubeflow.org/v2beta1"
MPIJOBS_PATH = "/apis/kubeflow.org/v2beta1/mpijobs"


def mpijob_path(namespace: str, name: str) -> str:
    """The API path of one MPIJob.

    >>> mpijob_path("ml", "mnist")
    '/apis/kubeflow.org/v2beta1/namespaces/ml/mpijobs/mnist'
    """
    return f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{name}"


PLAN_ANNOTATION = "phalanx.io/elastic-plan"
"""MPIJob annotation: the placement manager's current plan for the job, as compact JSON."""
MOVED_AT_ANNOTATION = "phalanx.io/elastic-moved-at"
"""MPIJob annotation: when the placement manager last moved one of its workers (seconds since the epoch),
so that the moves' cooldown outlives a restart."""


def render_plan(workers: int, nodes: dict[str, int]) -> str:
    """The plan annotation's text: ``{"nodes":{"n1":4},"workers":4}`` (keys sorted, no spaces).

    >>> render_plan(4, {"n2": 1, "n1": 3})
    '{"nodes":{"n1":3,"n2":1},"workers":4}'
    """
    return json.dumps({"nodes": dict(sorted(nodes.items())), "workers": workers}, separators=(",", ":"))


def parse_plan(text: str | None) -> dict[str, int]:
    """Node -> workers of a plan annotation; empty for none or for text that is not a plan.

    >>> parse_plan('{"nodes":{"n1":3,"n2":1},"workers":4}')
    {'n1': 3, 'n2': 1}
    """
    try:
        nodes = json.loads(text or "{}").get("nodes")
    except (ValueError, AttributeError, RecursionError):  # hand-edited text, however deeply nested
        return {}
    if not isinstance(nodes, dict):
        return {}
    return {
        str(node): count
        for node, count in sorted(nodes.items())
        if isinstance(count, int) and not isinstance(count, bool) and count > 0
    }


@dataclass(frozen=True, slots=True)
class MpiJob:
    """One MPIJob, as declared.

    Attributes:
        namespace: its namespace.
        name: its name.
        uid: its UID (events name it).
        created: its creation time, RFC 3339.
        replicas: ``Worker.replicas`` now.
        min_available: ``schedulingPolicy.minAvailable`` as written (checked later), or ``None``.
        max_workers: the ``phalanx.io/max-workers`` annotation as written, or ``None``: not elastic.
        worker: what one worker requests.
        queue: the queue label of the Worker template, or ``None`` (the default queue).
        plan: the ``phalanx.io/elastic-plan`` annotation the placement manager last wrote, if any.
        moved_at: the ``phalanx.io/elastic-moved-at`` annotation, if any and a number.
        throughput: the job's ``phalanx.io/throughput`` report as written (``kubeio.progress``), if any.
        samples: the ``phalanx.io/throughput-samples`` phalanx recorded, as written, if any.
        attained: the attained service phalanx recorded (``kubeio.attained``), if any and readable.
        workers_active: ``status.replicaStatuses.Worker.active``, the running workers its operator
            recorded, or ``None`` when it recorded no worker status (or one of the wrong shape).
        problem: why phalanx cannot read the MPIJob (a field of the wrong shape), or ``None``; such a
            job is refused with this reason and left alone.
    """

    namespace: str
    name: str
    uid: str
    created: str
    replicas: int
    min_available: object
    max_workers: str | None
    worker: Resources
    queue: str | None
    plan: str | None = None
    moved_at: float | None = None
    problem: str | None = None
    throughput: str | None = None
    samples: str | None = None
    attained: Attained | None = None
    kueue_queue: str | None = None
    workers_active: int | None = None

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def elastic(self) -> bool:
        """Whether it declares a maximum, which makes it the planner's to size and move."""
        return self.max_workers is not None


def mpijob_from_api(raw: object) -> MpiJob:
    """Convert an MPIJob.

    Raises:
        ConvertError: a field has the wrong shape.
    """
    parts = api_parts(raw, "mpijob")
    meta, spec = parts.metadata, parts.spec
    replica_specs = spec.get("mpiReplicaSpecs") or {}
    worker = replica_specs.get("Worker") if isinstance(replica_specs, dict) else None
    if not isinstance(worker, dict):
        msg = "spec.mpiReplicaSpecs.Worker must be an object"
        raise ConvertError(msg)
    replicas = worker.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        msg = "spec.mpiReplicaSpecs.Worker.replicas must be a whole number"
        raise ConvertError(msg)
    template = worker.get("template") or {}
    template_meta = (template.get("metadata") or {}) if isinstance(template, dict) else {}
    labels = template_meta.get("labels") or {}
    policy = ((spec.get("runPolicy") or {}).get("schedulingPolicy") or {}) if isinstance(spec, dict) else {}
    max_workers = parts.annotations.get(MAX_WORKERS_ANNOTATION)
    return MpiJob(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        replicas=replicas,
        min_available=policy.get("minAvailable") if isinstance(policy, dict) else None,
        max_workers=max_workers,
        worker=pod_requests(template.get("spec") or {}) if isinstance(template, dict) else Resources(),
        queue=labels.get(QUEUE_LABEL) if isinstance(labels, dict) else None,
        plan=parts.annotations.get(PLAN_ANNOTATION),
        moved_at=_seconds(parts.annotations.get(MOVED_AT_ANNOTATION)),
        throughput=parts.annotations.get(THROUGHPUT_ANNOTATION),
        samples=parts.annotations.get(SAMPLES_ANNOTATION),
        attained=parse_attained(parts.annotations.get(ATTAINED_ANNOTATION)),
        kueue_queue=_labels(meta.get("labels")).get(KUEUE_QUEUE_LABEL) or None,
        workers_active=_workers_active(parts.status),
    )


def _workers_active(status: Mapping[str, object]) -> int | None:
    """``status.replicaStatuses.Worker.active`` (absent, the Go client's ``omitempty``: 0), or ``None``."""
    statuses = status.get("replicaStatuses")
    worker = statuses.get("Worker") if isinstance(statuses, dict) else None
    if not isinstance(worker, dict):
        return None
    active = worker.get("active", 0)
    return active if isinstance(active, int) and not isinstance(active, bool) and active >= 0 else None


def _labels(value: object) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def refused_mpijob(raw: object, reason: str) -> MpiJob | None:
    """The MPIJob ``raw`` that cannot be read, as a refused marker.

    ``None`` when it declares nothing elastic (then it is the MPI Operator's alone, not phalanx's to
    refuse) or has no name.
    """
    namespace, name, uid = identity(raw)
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    declared = annotations.get(MAX_WORKERS_ANNOTATION) if isinstance(annotations, dict) else None
    if declared is None or not name:
        return None
    return MpiJob(namespace, name, uid, "", 0, None, str(declared), Resources(), None, problem=reason)


def _seconds(text: str | None) -> float | None:
    """A number of seconds, or ``None`` for none or for text that is not a finite number."""
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def elastic_job(job: MpiJob, pods: Iterable[Pod], queue: str, gpus_in_cluster: int) -> ElasticJob:
    """The planner's view of an elastic ``job`` whose pods are among ``pods``.

    Raises:
        JobError: the declaration cannot be honoured; the message is for the MPIJob's event.
    """
    allowed = check_job(job.key, job.min_available, job.max_workers, gpus_in_cluster, job.worker.gpus)
    if job.kueue_queue is not None:
        allowed = kueue_range(job, allowed)
    workers = workers_of(job.namespace, job.name, pods)
    running = sum(1 for p in workers if p.phase == "Running" and replica_index(p) < job.replicas)
    return ElasticJob(
        job.key,
        queue,
        allowed.low,
        allowed.high,
        job.worker,
        workers,
        job.created,
        job.replicas,
        capped=allowed.capped,
        operator=OperatorCount(job.workers_active, running),
    )


def kueue_range(job: MpiJob, declared: WorkerRange) -> WorkerRange:
    """The range of an elastic MPIJob submitted to Kueue: exactly the workers Kueue admitted.

    Kueue admits an MPIJob's pod sets at their counts and stops (suspends) a running job whose counts
    then differ from its Workload's (``EquivalentToWorkload`` in Kueue's job reconciler): growing it
    would take GPUs its ClusterQueue never granted, and shrinking it would have Kueue stop the whole
    job. Kueue v0.17 resizes admitted workloads only for the kinds its ``ElasticJobsViaWorkloadSlices``
    covers, not MPIJobs; until it does, phalanx keeps such a job at its admitted size and still lays it
    out and moves its workers (a move keeps the count).
    """
    size = job.replicas
    why = (
        f"MPIJob {job.key}: submitted to Kueue (LocalQueue {job.kueue_queue}), which admitted {size} "
        f"workers; phalanx keeps it at {size}, between its min {declared.low} and max {declared.high} "
        "only as far as Kueue admits (Kueue stops a job whose worker count changes)"
    )
    return WorkerRange(size, size, why)


def mpijob_ref(job: MpiJob) -> ObjectRef:
    """The MPIJob as the object of an event."""
    return ObjectRef("MPIJob", API_VERSION, job.namespace, job.name, job.uid)


class MpiJobWriter:
    """Reads MPIJobs and their workers, resizes them and shows their plan, through the API server."""

    def __init__(self, http: KubeHttp, *, timeout: float = 20.0) -> None:
        self._http = http
        self._timeout = timeout

    def list(self) -> list[MpiJob]:
        """Every MPIJob the API server has (none without the CRD).

        One that cannot be read and declares ``phalanx.io/max-workers`` comes back refused
        (``MpiJob.problem``), so that the pass says so on it; one that declares nothing elastic is
        the operator's alone and is left out.
        """
        try:
            reply = self._http.request("GET", MPIJOBS_PATH, timeout=self._timeout)
        except NotFoundError:  # the MPI Operator's CRD is not installed: nothing elastic to manage
            return []
        jobs = []
        for raw in reply.get("items") or []:
            try:
                jobs.append(mpijob_from_api(raw))
            except Exception as exc:  # whatever one job holds, the others are read
                reason = str(exc) if isinstance(exc, ConvertError) else f"{type(exc).__name__}: {exc}"
                if (refused := refused_mpijob(raw, reason[:1024])) is not None:
                    jobs.append(refused)
        return sorted(jobs, key=lambda j: j.key)

    def get(self, namespace: str, name: str) -> MpiJob | None:
        """One MPIJob, or ``None`` if it does not exist (or the CRD is not installed).

        Raises:
            KubeError: the API server failed.
            ConvertError: the MPIJob has the wrong shape.
        """
        try:
            raw = self._http.request(
                "GET",
                mpijob_path(namespace, name),
                timeout=self._timeout,
            )
        except NotFoundError:
            return None
        return mpijob_from_api(raw)

    def workers(self, namespace: str, name: str) -> tuple[Pod, ...]:
        """The job's worker pods as the API server has them now (a consistent read, not a cache).

        Raises:
            KubeError: the API server failed.
        """
        selector = f"{JOB_NAME_LABEL}={name},{ROLE_LABEL}=worker"
        reply = self._http.request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods",
            query={"labelSelector": selector},
            timeout=self._timeout,
        )
        pods = []
        for raw in reply.get("items") or []:
            try:
                pods.append(pod_from_api(raw))
            except ConvertError:
                continue
        return workers_of(namespace, name, pods)

    def update(
        self,
        namespace: str,
        name: str,
        *,
        replicas: int | None = None,
        plan: str | None = None,
        samples: str | None = None,
        moved_at: float | None = None,
        attained: Attained | None = None,
    ) -> None:
        """Write what changed on the MPIJob in one merge patch (``None``: leave as it is).

        ``replicas`` is ``Worker.replicas`` (the operator then deletes the highest indices or creates the
        missing), ``plan`` the placement manager's plan (``phalanx.io/elastic-plan``, which the pin
        webhook reads as the new workers are created: written with the size, never after it), and
        ``samples`` the throughput samples learned of the job (``phalanx.io/throughput-samples``), and
        ``moved_at`` when one of its workers is moved (``phalanx.io/elastic-moved-at``, written before
        the worker is deleted, so a restarted placement manager still knows the cooldown started), and
        ``attained`` the job's attained service now (``phalanx.io/attained-gpu-seconds``). One write,
        not five: each write wakes the job's MPI Operator, which delays every wake-up of a job
        exponentially until one of its syncs succeeds, and a write landing during a sync fails that
        sync's status update.

        Raises:
            KubeError: the job is gone or the API server failed.
        """
        moved = f"{moved_at:.3f}" if moved_at is not None else None
        record = render_attained(attained) if attained is not None else None
        pairs = (
            (PLAN_ANNOTATION, plan),
            (SAMPLES_ANNOTATION, samples),
            (MOVED_AT_ANNOTATION, moved),
            (ATTAINED_ANNOTATION, record),
        )
        annotations = {key: value for key, value in pairs if value}
        body: JsonObject = {"metadata": {"annotations": annotations}} if annotations else {}
        if replicas is not None:
            body["spec"] = {"mpiReplicaSpecs": {"Worker": {"replicas": replicas}}}
        if body:
            self._patch(namespace, name, body)

    def _patch(self, namespace: str, name: str, body: JsonObject) -> None:
        """Merge-patch the MPIJob."""
        self._http.request(
            "PATCH",
            mpijob_path(namespace, name),
            body=body,
            content_type="application/merge-patch+json",
            timeout=self._timeout,
        )
