"""The admission gate on the wire: the webhook's patch adds it, the release patch removes only it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubeio.gate_patches import JsonPatch, gate_ops, ungate_patch
from kubeio.webhook_review import allow, read_gate_review, read_review
from tests.kubeio.test_webhook_review import WORKER, patch_of, review

GATE = {"name": "phalanx.io/admission"}


def with_spec(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {**pod, "spec": {**pod["spec"], **spec}}


class PatchRefusedError(Exception):
    """What the API server answers (422) when a ``test`` operation fails: nothing is applied."""


def apply(patch: JsonPatch, obj: dict[str, Any]) -> dict[str, Any]:
    """RFC 6902 ``add``, ``remove`` and ``test``, all or nothing, as the API server applies them."""
    result = copy.deepcopy(obj)
    for op in patch:
        *parents, last = op["path"].strip("/").split("/")
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if op["op"] == "test":
            if isinstance(target, list):
                here = target[int(last)] if int(last) < len(target) else None
            else:
                here = target.get(last)
            if here != op["value"]:
                raise PatchRefusedError(op["path"])
        elif op["op"] == "remove":
            del target[int(last) if isinstance(target, list) else last]
        elif last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]
    return result


# -- the webhook adds it ---------------------------------------------------------------------------

GATING = {
    "a phalanx pod without gates gets the list": (
        WORKER,
        [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}],
    ),
    "a phalanx pod with another gate gets ours appended": (
        with_spec(WORKER, schedulingGates=[{"name": "example.com/quota"}]),
        [{"op": "add", "path": "/spec/schedulingGates/-", "value": GATE}],
    ),
    "a pod of another scheduler is left alone": (with_spec(WORKER, schedulerName="default-scheduler"), []),
    "a pod that names its node is left alone (the API server refuses gates on it)": (
        with_spec(WORKER, nodeName="n1"),
        [],
    ),
    "a pod that has the gate already is left alone": (with_spec(WORKER, schedulingGates=[GATE]), []),
}


@pytest.mark.parametrize(("pod", "ops"), GATING.values(), ids=GATING.keys())
def test_the_webhook_gates_every_phalanx_pod_it_sees_created(pod: dict[str, Any], ops: JsonPatch) -> None:
    admission = read_gate_review(review(pod))
    assert gate_ops(admission) == ops
    if ops:
        answer = allow(admission.uid, patch=ops)
        patched = apply(patch_of(answer), pod)
        assert GATE in patched["spec"]["schedulingGates"]
        assert [g for g in patched["spec"]["schedulingGates"] if g != GATE] == pod["spec"].get(
            "schedulingGates", []
        )


def test_an_update_is_not_gated() -> None:
    body = json.loads(review(WORKER))
    body["request"]["operation"] = "UPDATE"
    assert gate_ops(read_gate_review(json.dumps(body).encode())) == []


def test_a_pinned_worker_gets_the_gate_and_its_toleration_in_one_patch() -> None:
    admission = read_review(review(WORKER))
    toleration = {"key": "phalanx.io/hostname", "operator": "Equal", "value": "n1", "effect": "NoSchedule"}
    ops = gate_ops(read_gate_review(review(WORKER)))
    answer = allow(admission.uid, add_toleration=toleration, has_tolerations=False, patch=ops)
    patched = apply(patch_of(answer), WORKER)
    assert (patched["spec"]["schedulingGates"], patched["spec"]["tolerations"]) == ([GATE], [toleration])


# -- the release removes only it -------------------------------------------------------------------

STORED = with_spec(
    {**WORKER, "metadata": {**WORKER["metadata"], "namespace": "ml", "uid": "pod-uid-1"}},
    schedulingGates=[{"name": "example.com/quota"}, GATE, {"name": "example.com/data"}],
)


def test_the_release_removes_only_the_admission_gate_keeping_the_others_in_order() -> None:
    patch = ungate_patch("pod-uid-1", ["example.com/quota", "phalanx.io/admission", "example.com/data"])
    assert patch is not None
    assert apply(patch, STORED)["spec"]["schedulingGates"] == [
        {"name": "example.com/quota"},
        {"name": "example.com/data"},
    ]


def test_the_last_gate_removed_leaves_the_pod_schedulable() -> None:
    patch = ungate_patch("pod-uid-1", ["phalanx.io/admission"])
    assert patch is not None
    assert apply(patch, with_spec(STORED, schedulingGates=[GATE]))["spec"]["schedulingGates"] == []


CHANGED = {
    "another gate was removed meanwhile: the index moved": with_spec(
        STORED, schedulingGates=[GATE, {"name": "example.com/data"}]
    ),
    "the gate is gone already (another leader released it)": with_spec(
        STORED, schedulingGates=[{"name": "example.com/quota"}, {"name": "example.com/data"}]
    ),
    "the pod was re-created under the same name": {
        **STORED,
        "metadata": {**STORED["metadata"], "uid": "pod-uid-2"},
    },
}


@pytest.mark.parametrize("stored", CHANGED.values(), ids=CHANGED.keys())
def test_a_pod_that_changed_since_the_cache_saw_it_refuses_the_whole_patch(stored: dict[str, Any]) -> None:
    patch = ungate_patch("pod-uid-1", ["example.com/quota", "phalanx.io/admission", "example.com/data"])
    assert patch is not None
    with pytest.raises(PatchRefusedError):
        apply(patch, stored)


def test_a_pod_without_the_admission_gate_needs_no_patch() -> None:
    assert ungate_patch("pod-uid-1", ["example.com/quota"]) is None


def test_a_pod_created_with_generate_name_is_gated() -> None:
    """A Job's pod (an MPIJob's launcher) has no name at admission: it was let through ungated."""
    launcher = copy.deepcopy(WORKER)
    del launcher["metadata"]["name"]
    launcher["metadata"]["generateName"] = "mnist-launcher-"
    assert read_review(review(launcher)).pod.name == "mnist-launcher-<generated>"  # the pin webhook reads it
    gating = read_gate_review(review(launcher))
    assert gate_ops(gating) == [{"op": "add", "path": "/spec/schedulingGates", "value": [GATE]}]
