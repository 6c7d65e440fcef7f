"""Workload helpers for the test bed: create pods, wait for conditions, read events and GPU holdings."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kubeio.errors import ConflictError
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


def get_pod(http: KubeHttp, namespace: str, name: str) -> JsonObject:
    return http.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")


def events_for(http: KubeHttp, namespace: str, name: str) -> list[JsonObject]:
    query = {"fieldSelector": f"involvedObject.name={name}"}
    return list(http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or [])


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
