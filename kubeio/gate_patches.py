"""The admission gate on the wire: added to a pod as it is created, removed when its group is released.

Pods of scheduler ``phalanx`` are created with the scheduling gate ``phalanx.io/admission``
(``scheduling.model.ADMISSION_GATE``), so kube-scheduler leaves them out of its queue until the
placement manager removes it (``scheduling.admission.release`` decides when; docs/design/admission-gates.md
says why). Both edits are JSON patches (RFC 6902):

- at creation, the mutating webhook's answer appends the gate (``gate_ops``);
- at release, a patch of the pod removes only that gate (and, when plans are carried on pods, adds the
  pod's ``phalanx.io/plan`` in the same patch), by index, after two ``test`` operations: the
  pod's UID (a pod deleted and re-created under the same name is not released by mistake) and the gate
  at that index. If anything changed since the cache saw the pod (another gate removed, the gate already
  gone), the API server refuses the whole patch (422) and nothing is half-applied; the next pass, on
  fresher facts, patches again. Removing a gate that is gone is therefore never an error to retry
  blindly, and a pass that crashed between two pods' patches simply does the rest next time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from kubeio.errors import KubeError, NotFoundError
from kubeio.http import KubeHttp
from kubeio.node_annotations import MERGE_PATCH
from kubeio.pins import JSON_PATCH
from kubeio.webhook_review import GatePodReview
from scheduling.model import ADMISSION_GATE, GATE_STAMP, SCHEDULER_NAME, Pod

JsonPatch = list[dict[str, Any]]
"""A JSON patch: its operations, in order."""

_NONE: Mapping[str, str] = MappingProxyType({})


def gate_ops(review: GatePodReview) -> JsonPatch:
    """The operations adding the admission gate to the pod ``review`` creates, or none.

    Only a CREATE of a pod of scheduler ``phalanx`` is gated. A pod that names its node already
    (``spec.nodeName``) bypasses every scheduler, and the API server refuses scheduling gates on it; a
    pod that already has the gate (a client that adds it itself) is left as it is.
    """
    if (
        review.operation != "CREATE"
        or review.scheduler_name != SCHEDULER_NAME
        or review.node_name
        or ADMISSION_GATE in (review.gates or ())
    ):
        return []
    gate = {"name": ADMISSION_GATE}
    if review.gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def stamp_ops(review: GatePodReview, annotations: Mapping[str, str] = _NONE) -> JsonPatch:
    """The operations stamping a pod of scheduler ``phalanx`` being created: ``phalanx.io/gate-webhook``.

    The gate webhook stamps every such pod it answers for, gated or not (a pod naming its node is not),
    because the release pass removes gates: only the stamp tells a released pod from one created
    around the webhook (``placement.bypass_pass``). ``annotations`` are added with the stamp (the
    plan of a pod let in at the door, when plans are carried on pods).

    >>> stamp_ops(GatePodReview("u", "CREATE", "phalanx", "", None))
    [{'op': 'add', 'path': '/metadata/annotations', 'value': {'phalanx.io/gate-webhook': 'answered'}}]
    """
    if review.operation != "CREATE" or review.scheduler_name != SCHEDULER_NAME:
        return []
    wanted = {GATE_STAMP: "answered", **annotations}
    if review.has_annotations:
        return annotation_ops(wanted)
    return [{"op": "add", "path": "/metadata/annotations", "value": wanted}]


def ungate_patch(uid: str, gates: Sequence[str]) -> JsonPatch | None:
    """The patch removing the admission gate from the pod with ``uid`` whose gates are ``gates``.

    Args:
        uid: the pod's UID as the cache knows it; the patch fails on any other pod of that name.
        gates: the names of the pod's ``spec.schedulingGates``, in order, as the cache last saw them
            (``kubeio.convert.scheduling_gates``); other gates stay, in their order.

    Returns:
        The patch, or ``None`` when the pod has no admission gate (nothing to do).

    >>> ungate_patch("u1", ["example.com/quota", "phalanx.io/admission"])[1:]
    [{'op': 'test', 'path': '/spec/schedulingGates/1', 'value': {'name': 'phalanx.io/admission'}}, \
{'op': 'remove', 'path': '/spec/schedulingGates/1'}]
    """
    if ADMISSION_GATE not in gates:
        return None
    path = f"/spec/schedulingGates/{list(gates).index(ADMISSION_GATE)}"
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": path, "value": {"name": ADMISSION_GATE}},
        {"op": "remove", "path": path},
    ]


def annotation_ops(annotations: Mapping[str, str]) -> JsonPatch:
    """JSON patch operations setting ``annotations`` on a pod that has an annotation map.

    >>> annotation_ops({"phalanx.io/plan": "n1:0"})
    [{'op': 'add', 'path': '/metadata/annotations/phalanx.io~1plan', 'value': 'n1:0'}]
    """
    return [
        {"op": "add", "path": f"/metadata/annotations/{_pointer(key)}", "value": value}
        for key, value in sorted(annotations.items())
    ]


def annotation_patch(uid: str, annotations: Mapping[str, str]) -> dict[str, object]:
    """A merge patch setting ``annotations`` on the pod with ``uid`` (another UID: 409, nothing written)."""
    return {"metadata": {"uid": uid, "annotations": dict(annotations)}}


def _pointer(key: str) -> str:
    """``key`` as one JSON pointer segment (RFC 6901: ``~`` then ``/`` escaped)."""
    return key.replace("~", "~0").replace("/", "~1")


class GateWriter:
    """Removes the admission gate from pods, through the API server (one guarded JSON patch each)."""

    def __init__(self, http: KubeHttp, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    def ungate(self, pod: Pod, annotations: Mapping[str, str] = _NONE) -> bool:
        """Remove the admission gate from ``pod`` as the cache saw it; ``False`` if it was not removed.

        ``False`` means the pod is gone, or changed since the cache saw it (422 from a failed ``test``:
        another gate removed, the gate already gone, the pod re-created): the next pass decides again on
        fresher facts. A pod without the gate is nothing to do (``True``).

        ``annotations`` are set in the same patch, so a pod is never seen ungated without them, when
        the pod carries the gate webhook's stamp (it then has an annotation map to add to); on a pod
        without it they are merged first, in a patch of their own (``annotation_patch``).

        Raises:
            KubeError: the API server failed otherwise (unreachable, forbidden); the next pass retries.
        """
        patch = ungate_patch(pod.uid, pod.gates)
        if patch is None:
            return True
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
        if annotations and pod.gate_stamped:
            patch = [*patch, *annotation_ops(annotations)]
        elif annotations:
            body = annotation_patch(pod.uid, annotations)
            try:
                self._http.request("PATCH", path, body=body, content_type=MERGE_PATCH, timeout=self._timeout)
            except NotFoundError:
                return False
            except KubeError as exc:
                if exc.status == 409:  # re-created under that name: not the pod the pass decided for
                    return False
                raise
        try:
            self._http.request("PATCH", path, body=patch, content_type=JSON_PATCH, timeout=self._timeout)
        except NotFoundError:
            return False
        except KubeError as exc:
            if exc.status == 422:
                return False
            raise
        return True
