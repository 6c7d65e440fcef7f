"""What the harness sends the extender directly: a pod in kube-scheduler's request shape, and a POST.

The per-call figures (``extender_calls``, ``envelope``, ``liveprofile``, ``profiling``) and the bench
bed's readiness probe all post the same kind of request; the pod carries what a real request carries,
so the extender's parsing costs what it costs for a real pod.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import zlib

import orjson

from kubeio.http import JsonObject


def probe_pod(
    name: str, gpus: int, *, namespace: str = "perf-calls", scheduler: str = "phalanx"
) -> JsonObject:
    """A pending pod in the shape kube-scheduler sends it to the extender (fixtures/extender filter calls).

    It carries what a real request carries (defaulted spec, tolerations, status with a condition), so
    the extender's parsing costs what it costs for a real pod.
    """
    resources: dict[str, dict[str, str]] = {"limits": {"cpu": "4", "memory": "32Gi"}}
    resources["requests"] = dict(resources["limits"])
    if gpus:
        resources["limits"]["nvidia.com/gpu"] = resources["requests"]["nvidia.com/gpu"] = str(gpus)
    toleration = {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"00000000-0000-4000-8000-{zlib.crc32(name.encode()):012d}",
            "resourceVersion": "282",
            "generation": 1,
            "creationTimestamp": "2026-11-22T09:16:59Z",
            "labels": {"app": "perf"},
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": resources,
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": scheduler,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", **toleration},
                {"key": "node.kubernetes.io/unreachable", **toleration},
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-22T09:16:59Z",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                }
            ],
            "qosClass": "Guaranteed",
        },
    }


def post_json(url: str, body: bytes, timeout: float = 30.0) -> JsonObject:
    """POST a JSON body and decode the JSON reply (used outside the timed loops)."""
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            data = reply.read()
    except urllib.error.HTTPError as exc:
        msg = f"POST {url}: HTTP {exc.code}: {exc.read()[:300]!r}"
        raise RuntimeError(msg) from exc
    value = orjson.loads(data)
    if not isinstance(value, dict):
        msg = f"POST {url}: reply is not a JSON object"
        raise RuntimeError(msg)
    return value
