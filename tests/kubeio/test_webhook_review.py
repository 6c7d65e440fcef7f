"""Admission reviews of pods: what the API server sends for a CREATE, and the answer with a patch."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kubeio.webhook_review import ReviewError, allow, read_review

WORKER: dict[
    str, Any
] = {  # a worker as the MPI Operator v0.7.0 creates it: no UID yet, no namespace in metadata
    "kind": "Pod",
    "apiVersion": "v1",
    "metadata": {
        "name": "mnist-worker-3",
        "labels": {
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": "3",
        },
        "ownerReferences": [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "mnist"}],
    },
    "spec": {
        "schedulerName": "phalanx",
        "containers": [{"name": "worker", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
    },
    "status": {},
}


def review(obj: Any, *, kind: str = "Pod", version: str = "admission.k8s.io/v1") -> bytes:
    return json.dumps(
        {
            "apiVersion": version,
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": kind},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "ml",
                "operation": "CREATE",
                "userInfo": {"username": "system:serviceaccount:mpi-operator:mpi-operator"},
                "object": obj,
                "dryRun": False,
            },
        }
    ).encode()


def test_a_worker_being_created_is_read_with_the_requests_namespace_and_uid() -> None:
    admission = read_review(review(WORKER))
    assert admission.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert (admission.pod.key, admission.pod.uid) == ("ml/mnist-worker-3", admission.uid)
    assert admission.pod.requests.gpus == 2
    assert not admission.has_tolerations and not admission.pod.pinned


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(b"{not json", "not an AdmissionReview", id="not-json"),
        pytest.param(
            review(WORKER, version="admission.k8s.io/v1beta1"),
            "expected an admission.k8s.io/v1",
            id="v1beta1",
        ),
        pytest.param(review(WORKER, kind="Service"), "expected a Pod, got Service", id="not-a-pod"),
        pytest.param(review({**WORKER, "spec": {"priority": "high"}}), "spec.priority", id="bad-pod"),
        pytest.param(
            b'{"apiVersion": "admission.k8s.io/v1", "request": {"kind": 3}}',
            "not an AdmissionReview",
            id="bad-shape",
        ),
    ],
)
def test_what_is_not_a_review_of_a_pod_is_refused_with_the_reason(body: bytes, reason: str) -> None:
    with pytest.raises(ReviewError, match=reason):
        read_review(body)


def patch_of(answer: bytes) -> list[Any]:
    response = json.loads(answer)["response"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    decoded: list[Any] = json.loads(base64.b64decode(response["patch"]))
    return decoded


def test_the_answer_adds_the_toleration_to_a_list_or_makes_the_list() -> None:
    toleration = {"key": "phalanx.io/hostname", "operator": "Equal", "value": "n1", "effect": "NoSchedule"}
    assert patch_of(allow("u", add_toleration=toleration, has_tolerations=True)) == [
        {"op": "add", "path": "/spec/tolerations/-", "value": toleration}
    ]
    assert patch_of(allow("u", add_toleration=toleration, has_tolerations=False)) == [
        {"op": "add", "path": "/spec/tolerations", "value": [toleration]}
    ]
    plain = json.loads(allow("u"))
    assert plain == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }
