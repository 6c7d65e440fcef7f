"""Admission reviews of pods (``admission.k8s.io/v1``): read what is created, answer with a JSON patch.

The placement manager's webhook is a mutating webhook on pod CREATE. The API server sends an
``AdmissionReview`` whose ``request.object`` is the pod as it will be stored: no UID yet, its namespace
may be only in ``request.namespace``, and a pod created with ``generateName`` has no name yet. The answer
always allows the pod (a webhook that pins or gates must never be the reason a pod cannot be created); it
may carry a JSON patch: one toleration (the pin), the admission gate (``kubeio.gates``), or both.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson

from kubeio.convert import ConvertError, pod_from_api, scheduling_gates
from scheduling.model import Pod

REVIEW_VERSION = "admission.k8s.io/v1"


class ReviewError(ValueError):
    """The body is not an AdmissionReview of a pod; the message says what is wrong."""


class _Kind(msgspec.Struct, frozen=True):
    group: str = ""
    version: str = ""
    kind: str = ""


class _Request(msgspec.Struct, frozen=True):
    uid: str
    kind: _Kind = _Kind()
    name: str = ""
    namespace: str = ""
    operation: str = ""
    object: dict[str, Any] | None = None


class _Review(msgspec.Struct, frozen=True):
    apiVersion: str = ""  # noqa: N815 - the wire name
    kind: str = ""
    request: _Request | None = None


@dataclass(frozen=True, slots=True)
class PodAdmission:
    """One pod being created, as the review brings it.

    Attributes:
        uid: the review's UID, which the answer must repeat.
        pod: the pod (its UID is the review's, since the pod has none yet).
        has_tolerations: whether ``spec.tolerations`` exists (decides the patch's path).
        operation: ``request.operation`` (``CREATE`` for what the webhook is registered for).
        gates: the names of ``spec.schedulingGates``, in order (``None``: the field is absent, which
            decides the patch's path).
    """

    uid: str
    pod: Pod
    has_tolerations: bool
    operation: str = "CREATE"
    gates: tuple[str, ...] | None = None


def _unnamed(meta: Mapping[str, Any]) -> str:
    """What a pod being created with ``generateName`` is called until the API server names it."""
    prefix = meta.get("generateName")
    return f"{prefix}<generated>" if isinstance(prefix, str) and prefix else ""


def read_review(body: bytes) -> PodAdmission:
    """Decode an AdmissionReview of a pod CREATE.

    Raises:
        ReviewError: the body is not JSON of that shape; the message says why.
    """
    try:
        review = msgspec.json.decode(body, type=_Review)
    except msgspec.DecodeError as exc:
        msg = f"not an AdmissionReview: {exc}"
        raise ReviewError(msg) from None
    request = review.request
    if review.apiVersion != REVIEW_VERSION or request is None:
        msg = f"expected an {REVIEW_VERSION} AdmissionReview with a request"
        raise ReviewError(msg)
    if request.kind.kind != "Pod" or request.object is None:
        msg = f"review {request.uid}: expected a Pod, got {request.kind.kind or 'nothing'}"
        raise ReviewError(msg)
    raw = dict(request.object)
    meta = dict(raw.get("metadata") or {})
    meta["uid"] = meta.get("uid") or request.uid
    meta["namespace"] = meta.get("namespace") or request.namespace
    # A pod created with ``generateName`` (by a Job, a ReplicaSet: an MPIJob's launcher) has no name yet:
    # the API server makes it after admission. It is named by its prefix here, for the logs.
    meta["name"] = meta.get("name") or request.name or _unnamed(meta)
    raw["metadata"] = meta
    spec = raw.get("spec")
    try:
        pod = pod_from_api(raw)
        has_gates = isinstance(spec, dict) and isinstance(spec.get("schedulingGates"), list)
        gates = scheduling_gates(spec) if has_gates and isinstance(spec, dict) else None
    except ConvertError as exc:
        msg = f"review {request.uid}: {exc}"
        raise ReviewError(msg) from None
    has_tolerations = isinstance(spec, dict) and isinstance(spec.get("tolerations"), list)
    return PodAdmission(request.uid, pod, has_tolerations, request.operation, gates)


def allow(
    uid: str,
    *,
    add_toleration: dict[str, Any] | None = None,
    has_tolerations: bool = True,
    patch: Sequence[Mapping[str, Any]] = (),
) -> bytes:
    """The answer: allowed, with a JSON patch of ``patch`` and of adding ``add_toleration`` if given."""
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    ops = list(patch)
    if add_toleration is not None:
        ops.append(
            {"op": "add", "path": "/spec/tolerations/-", "value": add_toleration}
            if has_tolerations
            else {"op": "add", "path": "/spec/tolerations", "value": [add_toleration]}
        )
    if ops:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(ops)).decode()
    return orjson.dumps({"apiVersion": REVIEW_VERSION, "kind": "AdmissionReview", "response": response})
