"""Workload helpers for the test bed: create pods, wait for conditions, read events and GPU holdings."""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from kubeio.errors import ConflictError, NotFoundError
from kubeio.http import JsonObject, KubeHttp

T = TypeVar("T")


def ensure_namespace(http: KubeHttp, name: str) -> None:
    with contextlib.suppress(ConflictError):
        http.request(
            "POST",
            "/api/v1/namespaces",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )


def gpu_pod(
    name: str,
    gpus: int,
    *,
    scheduler: str = "phalanx",
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
) -> JsonObject:
    resources: dict[str, Any] = {
        "requests": {"cpu": "1", "memory": "1Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "terminationGracePeriodSeconds": 5,
        "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": resources}],
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": spec,
    }


def create_pod(http: KubeHttp, namespace: str, pod: JsonObject) -> JsonObject:
    return http.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod)


def list_pods(http: KubeHttp, namespace: str | None = None) -> list[JsonObject]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    return list(http.request("GET", path).get("items") or [])


def delete_pods(http: KubeHttp, namespace: str, *, timeout: float = 60.0) -> None:
    """Delete every pod of ``namespace`` at once (no grace period) and wait until they are gone."""
    for pod in list_pods(http, namespace):
        with contextlib.suppress(NotFoundError):
            http.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}",
                body={"gracePeriodSeconds": 0},
            )
    wait_for("pods deleted", lambda: not list_pods(http, namespace), timeout=timeout)


def get_pod(http: KubeHttp, namespace: str, name: str) -> JsonObject:
    return http.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")


def events_for(http: KubeHttp, namespace: str, name: str) -> list[JsonObject]:
    query = {"fieldSelector": f"involvedObject.name={name}"}
    return list(http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or [])


def said(http: KubeHttp, namespace: str, name: str, reason: str, words: str = "") -> str | None:
    """The message of the newest event ``reason`` about ``name`` that contains ``words``, or None."""
    found = [e for e in events_for(http, namespace, name) if e["reason"] == reason and words in e["message"]]
    return str(found[-1]["message"]) if found else None


def kept_gated(http: KubeHttp, namespace: str, name: str, words: str = "", *, timeout: float = 60.0) -> str:
    """The message (``kept gated: <sentence>``) of the release pass's ``AdmissionWaiting`` event.

    Waits for one about ``name`` (a pod, or a gang's PodGroup) that contains ``words``.
    """
    try:
        return wait_for(
            f"{name} kept gated ({words})",
            lambda: said(http, namespace, name, "AdmissionWaiting", words),
            timeout=timeout,
        )
    except AssertionError as timed_out:
        seen = [(e["reason"], e["message"]) for e in events_for(http, namespace, name)]
        msg = f"{timed_out}; events of {name}: {seen}"
        raise AssertionError(msg) from timed_out


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float = 60.0, interval: float = 0.2) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    msg = f"timed out after {timeout}s waiting for {what} (last: {last!r})"
    raise AssertionError(msg)


def gpus_of(pod: JsonObject) -> tuple[int, ...]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get("phalanx.io/gpus", "")
    return tuple(int(i) for i in text.split(",")) if text else ()


def live(pod: JsonObject) -> bool:
    return bool(pod["spec"].get("nodeName")) and pod.get("status", {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def double_booked(pods: list[JsonObject]) -> list[str]:
    """Descriptions of every GPU index held by two live pods on one node (should be empty)."""
    holders: dict[tuple[str, int], list[str]] = {}
    for pod in pods:
        if live(pod):
            for gpu in gpus_of(pod):
                key = (pod["spec"]["nodeName"], gpu)
                holders.setdefault(key, []).append(
                    f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
                )
    return [f"{node} GPU {gpu}: {names}" for (node, gpu), names in sorted(holders.items()) if len(names) > 1]


def wait_pod(
    http: KubeHttp,
    namespace: str,
    name: str,
    what: str,
    predicate: Callable[[JsonObject], bool],
    timeout: float = 60.0,
) -> JsonObject:
    """Poll a pod until ``predicate`` holds for it; return that state of the pod."""

    def probe() -> JsonObject | None:
        pod = get_pod(http, namespace, name)
        return pod if predicate(pod) else None

    return wait_for(f"{namespace}/{name}: {what}", probe, timeout=timeout)


def running(pod: JsonObject) -> bool:
    return bool(pod.get("status", {}).get("phase") == "Running")


def podgroup(name: str, min_member: int, *, timeout_seconds: int | None = None) -> JsonObject:
    """A scheduler-plugins PodGroup."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout_seconds is not None:
        spec["scheduleTimeoutSeconds"] = timeout_seconds
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": spec,
    }


PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups"


def create_podgroup(http: KubeHttp, namespace: str, group: JsonObject) -> JsonObject:
    return http.request("POST", PODGROUPS.format(namespace=namespace), body=group)


def get_podgroup(http: KubeHttp, namespace: str, name: str) -> JsonObject:
    return http.request("GET", PODGROUPS.format(namespace=namespace) + f"/{name}")


def member(name: str, group: str, gpus: int, **kwargs: Any) -> JsonObject:
    """A pod labelled into PodGroup ``group``."""
    pod = gpu_pod(name, gpus, **kwargs)
    pod["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    return pod


NATIVE_PODGROUPS = "/apis/scheduling.k8s.io/v1alpha2/namespaces/{namespace}/podgroups"
"""Kubernetes' own PodGroups (Workload API, alpha in v1.36: ``Testbed(workload_api=True)``)."""


def native_podgroup(name: str, min_count: int) -> JsonObject:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup with a gang policy of ``min_count`` members."""
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def native_member(name: str, group: str, gpus: int, **kwargs: Any) -> JsonObject:
    """A pod that joins the native PodGroup ``group`` by ``spec.schedulingGroup``, with no label."""
    pod = gpu_pod(name, gpus, **kwargs)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


def gang_job(name: str, pods: int, gpus: int, *, seconds: float | None = None) -> JsonObject:
    """An indexed Job whose parallelism equals its completions: the shape ``WorkloadWithJob`` gangs."""
    template = gpu_pod(f"{name}-template", gpus, annotations=_finishing(seconds))
    template["spec"]["restartPolicy"] = "Never"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": template["metadata"].get("annotations", {})},
                "spec": template["spec"],
            },
        },
    }


def _finishing(seconds: float | None) -> dict[str, str] | None:
    return None if seconds is None else {"phalanx.io/sim-duration-seconds": str(seconds)}


class PodTimeline:
    """Watches a namespace's pods in a thread: when each was created (gated or not) and first got a node."""

    def __init__(self, http: KubeHttp, namespace: str) -> None:
        self.bound_at: dict[str, float] = {}
        self.created_at: dict[str, float] = {}
        self.created_gated: set[str] = set()
        """The pods that carried the admission gate ``phalanx.io/admission`` when they were created."""
        self._stop = threading.Event()
        self._http = http
        self._namespace = namespace
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def __enter__(self) -> PodTimeline:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self._namespace}/pods"
        version = str(self._http.request("GET", path)["metadata"]["resourceVersion"])
        self._ready.set()
        while not self._stop.is_set():
            query = {"resourceVersion": version, "timeoutSeconds": "5", "allowWatchBookmarks": "true"}
            for event in self._http.watch(path, query, timeout=15):
                obj = event.get("object") or {}
                version = str(obj.get("metadata", {}).get("resourceVersion", version))
                name = obj.get("metadata", {}).get("name")
                if event.get("type") == "ADDED":
                    self.created_at.setdefault(name, time.monotonic())
                    gates = obj.get("spec", {}).get("schedulingGates") or []
                    if any(g.get("name") == "phalanx.io/admission" for g in gates):
                        self.created_gated.add(name)
                if name and obj.get("spec", {}).get("nodeName"):
                    self.bound_at.setdefault(name, time.monotonic())
                if self._stop.is_set():
                    return


QUEUES = "/apis/scheduling.phalanx.io/v1alpha1/queues"


def queue(
    name: str, *, quota: int, weight: int, limit: int | None = None, parent: str | None = None
) -> JsonObject:
    """A phalanx Queue with a GPU quota, over-quota weight and optional limit."""
    gpu: dict[str, Any] = {"quota": quota, "overQuotaWeight": weight}
    if limit is not None:
        gpu["limit"] = limit
    spec: dict[str, Any] = {"resources": {"nvidia.com/gpu": gpu}}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "scheduling.phalanx.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def create_queue(http: KubeHttp, body: JsonObject) -> JsonObject:
    return http.request("POST", QUEUES, body=body)


def get_queue(http: KubeHttp, name: str) -> JsonObject:
    return http.request("GET", f"{QUEUES}/{name}")


MPIJOBS = "/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs"


def mpijob(
    name: str, workers: int, gpus_per_worker: int, *, work_gpu_seconds: float | None = None
) -> JsonObject:
    """An MPIJob as its users write it (the operator's own tensorflow-benchmarks example, with GPUs).

    No ``schedulingPolicy`` and no ``schedulerName``: the operator, run with
    ``--gang-scheduling=phalanx``, makes the PodGroup and sends the pods to phalanx.
    ``work_gpu_seconds`` sets the simulated kubelet's ``phalanx.io/sim-work-gpu-seconds``.
    """
    image = "mpioperator/tensorflow-benchmarks:latest"
    slots = max(gpus_per_worker, 1)
    launcher = {
        "image": image,
        "name": "launcher",
        "command": ["mpirun", "--allow-run-as-root", "-np", str(workers * slots), "python", "train.py"],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
    }
    worker = {
        "image": image,
        "name": "worker",
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"nvidia.com/gpu": str(gpus_per_worker)},
        },
    }
    annotations = {}
    if work_gpu_seconds is not None:
        annotations["phalanx.io/sim-work-gpu-seconds"] = f"{work_gpu_seconds:g}"
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "slotsPerWorker": slots,
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [launcher]}}},
                "Worker": {"replicas": workers, "template": {"spec": {"containers": [worker]}}},
            },
        },
    }


def elastic_mpijob(
    name: str, *, workers: int, gpus_per_worker: int, max_workers: str, min_available: int
) -> JsonObject:
    """An elastic MPIJob as docs/elastic-mpijobs.md has users write it, training for ever on the test bed.

    ``max_workers`` is the annotation's text as written (a test may write a bad one); ``min_available``
    counts the launcher, as the operator's ``schedulingPolicy.minAvailable`` does.
    """
    body = mpijob(name, workers=workers, gpus_per_worker=gpus_per_worker, work_gpu_seconds=1e9)
    body["metadata"]["annotations"]["phalanx.io/max-workers"] = max_workers
    body["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": min_available}
    return body


def create_mpijob(http: KubeHttp, namespace: str, job: JsonObject) -> JsonObject:
    return http.request("POST", MPIJOBS.format(namespace=namespace), body=job)


def get_mpijob(http: KubeHttp, namespace: str, name: str) -> JsonObject:
    return http.request("GET", MPIJOBS.format(namespace=namespace) + f"/{name}")


def condition(obj: JsonObject, kind: str) -> bool:
    """Whether ``obj``'s ``status.conditions`` has ``kind`` with status True."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def scrape(url: str) -> str:
    """The Prometheus text a ``/metrics`` URL serves."""
    with urllib.request.urlopen(url, timeout=10) as reply:
        text: str = reply.read().decode()
        return text


def metric_value(page: str, name: str, **labels: str) -> float | None:
    """The sum of the samples ``name`` of ``page`` whose labels include ``labels``; ``None`` if there is none.

    ``name`` is the sample's name as exposed (a counter's ends in ``_total``).
    """
    found = [
        float(sample.value)
        for family in text_string_to_metric_families(page)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]
    return sum(found) if found else None
