"""Admission reviews of pods (``admission.k8s.io/v1``): read what is created, answer with a JSON patch.

The placement manager's webhook is a mutating webhook on pod CREATE. The API server sends an
``AdmissionReview`` whose ``request.object`` is the pod as it will be stored: no UID yet, its namespace
may be only in ``request.namespace``, and a pod created with ``generateName`` has no name yet. The answer
always allows the pod (a webhook that pins or gates must never be the reason a pod cannot be created); it
may carry a JSON patch: one toleration (the pin), the admission gate (``kubeio.gate_patches``), or both.

Two readers, because the two webhooks need different amounts of the pod. The gate webhook's
configuration says ``failurePolicy: Ignore``, so any review it refuses lets a pod in ungated, past the
admission gate: ``read_gate_review`` therefore decodes only what gating decides on (the operation, the
scheduler, ``spec.nodeName`` and ``spec.schedulingGates``) and accepts any pod the API server can send,
whatever phalanx thinks of the rest of it. ``read_review`` reads the whole pod for the pin webhook. Both
refuse (``ReviewError``) only a body that is no AdmissionReview of a pod at all, which the API server
never sends.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

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


class _Gate(msgspec.Struct, frozen=True):
    name: str = ""


class _GateSpec(msgspec.Struct, frozen=True):
    schedulerName: str = ""  # noqa: N815 - the wire name
    nodeName: str = ""  # noqa: N815 - the wire name
    schedulingGates: list[_Gate] | None = None  # noqa: N815 - the wire name


class _GateMeta(msgspec.Struct, frozen=True):
    annotations: msgspec.Raw = msgspec.Raw(b"null")  # only whether it is there: it decides the stamp's path


class _GatePod(msgspec.Struct, frozen=True):
    metadata: msgspec.Raw = msgspec.Raw(b"{}")  # read apart: a pod of any metadata is still gated
    spec: _GateSpec = _GateSpec()


class _GateRequest(msgspec.Struct, frozen=True):
    uid: str
    kind: _Kind = _Kind()
    operation: str = ""
    object: _GatePod | None = None
    dryRun: bool | None = None  # noqa: N815 - the wire name


class _GateReview(msgspec.Struct, frozen=True):
    apiVersion: str = ""  # noqa: N815 - the wire name
    request: _GateRequest | None = None


@dataclass(frozen=True, slots=True)
class PodReview:
    """One pod being created, as the review brings it.

    Attributes:
        uid: the review's UID, which the answer must repeat.
        pod: the pod (its UID is the review's, since the pod has none yet).
        has_tolerations: whether ``spec.tolerations`` exists (decides the patch's path).
        operation: ``request.operation`` (``CREATE`` for what the webhook is registered for).
        gates: the names of ``spec.schedulingGates``, in order (``None``: the field is absent, which
            decides the patch's path).
        has_annotations: whether ``metadata.annotations`` exists (decides the stamp's patch path).
    """

    uid: str
    pod: Pod
    has_tolerations: bool
    operation: str = "CREATE"
    gates: tuple[str, ...] | None = None
    has_annotations: bool = False


@dataclass(frozen=True, slots=True)
class GatePodReview:
    """What the gate webhook decides on, for one pod being created.

    Attributes:
        uid: the review's UID, which the answer must repeat.
        operation: ``request.operation``.
        scheduler_name: ``spec.schedulerName`` (empty when absent).
        node_name: ``spec.nodeName`` (empty when absent).
        gates: the names of ``spec.schedulingGates``, in order (``None``: the field is absent or null,
            which decides the patch's path).
        has_annotations: whether ``metadata.annotations`` exists (decides the stamp's patch path).
        dry_run: ``request.dryRun``: nothing will be stored, so the answer must change nothing else.
    """

    uid: str
    operation: str
    scheduler_name: str
    node_name: str
    gates: tuple[str, ...] | None
    has_annotations: bool = False
    dry_run: bool = False


MAX_SHOWN = 300
"""Characters of a decoder's message kept in a reason."""


def _decode(body: bytes, kind: type[Any]) -> Any:
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.DecodeError as exc:
        text = str(exc)
        text = text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN]}... ({len(text)} characters)"
        msg = f"not an AdmissionReview: {text}"
        raise ReviewError(msg) from None
    except RecursionError:
        msg = "not an AdmissionReview: JSON nested too deeply"
        raise ReviewError(msg) from None


_R = TypeVar("_R", _Request, _GateRequest)


def _check(api_version: str, request: _R | None) -> _R:
    if api_version != REVIEW_VERSION or request is None:
        msg = f"expected an {REVIEW_VERSION} AdmissionReview with a request"
        raise ReviewError(msg)
    if request.kind.kind != "Pod" or request.object is None:
        kind = request.kind.kind[:MAX_SHOWN] or "nothing"
        msg = f"review {request.uid[:MAX_SHOWN]}: expected a Pod, got {kind}"
        raise ReviewError(msg)
    return request


def read_gate_review(body: bytes) -> GatePodReview:
    """Decode an AdmissionReview of a pod for the gate webhook: only what gating decides on.

    Raises:
        ReviewError: the body is no AdmissionReview of a pod; the message says why.
    """
    review: _GateReview = _decode(body, _GateReview)
    request = _check(review.apiVersion, review.request)
    pod = request.object if request.object is not None else _GatePod()
    spec = pod.spec
    gates = None if spec.schedulingGates is None else tuple(g.name for g in spec.schedulingGates)
    annotated = _has_annotations(pod.metadata)
    return GatePodReview(
        request.uid,
        request.operation,
        spec.schedulerName,
        spec.nodeName,
        gates,
        annotated,
        dry_run=bool(request.dryRun),
    )


def _has_annotations(metadata: msgspec.Raw) -> bool:
    """Whether the pod's metadata holds an annotations object (``False`` for metadata phalanx cannot read)."""
    try:
        meta = msgspec.json.decode(metadata, type=_GateMeta)
    except (msgspec.DecodeError, RecursionError):
        return False
    return bytes(meta.annotations) != b"null"


def _unnamed(meta: Mapping[str, Any]) -> str:
    """What a pod being created with ``generateName`` is called until the API server names it."""
    prefix = meta.get("generateName")
    return f"{prefix}<generated>" if isinstance(prefix, str) and prefix else ""


def read_review(body: bytes) -> PodReview:
    """Decode an AdmissionReview of a pod CREATE.

    Raises:
        ReviewError: the body is not JSON of that shape, or the pod is not one phalanx can read; the
            message says why.
    """
    review: _Review = _decode(body, _Review)
    request = _check(review.apiVersion, review.request)
    raw = dict(request.object or {})
    meta = raw.get("metadata") or {}
    if not isinstance(meta, dict):
        msg = f"review {request.uid[:MAX_SHOWN]}: metadata must be an object"
        raise ReviewError(msg)
    meta = dict(meta)
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
    has_annotations = isinstance(meta.get("annotations"), dict)
    return PodReview(request.uid, pod, has_tolerations, request.operation, gates, has_annotations)


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
