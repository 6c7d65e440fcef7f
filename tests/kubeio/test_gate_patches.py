"""The admission gate on the wire: the webhook's patch adds it, the release patch removes only it."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from kubeio.errors import ConflictError
from kubeio.gate_patches import GateWriter, JsonPatch, gate_ops, ungate_patch
from kubeio.node_annotations import MERGE_PATCH
from kubeio.pins import JSON_PATCH
from kubeio.webhook_review import allow, read_gate_review, read_review
from scheduling.model import GATE_STAMP, Pod
from tests.builders import a_pod
from tests.kubeio.fake_api import FakeApi
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
        # RFC 6901: each segment unescaped, "~1" to "/" then "~0" to "~".
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].strip("/").split("/")]
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


# -- the writer: a carried plan goes with the gate's removal -----------------------------------------


def gated_pod(*, stamped: bool) -> Pod:
    return replace(a_pod("w").gpus(2).gated().build(), gate_stamped=stamped)


def test_a_stamped_pod_gets_its_plan_in_the_ungate_patch_itself() -> None:
    """The stamp means the pod has an annotation map: one JSON patch, the plan added after the tests."""
    api = FakeApi(read_only=False)
    pod = gated_pod(stamped=True)
    assert GateWriter(api).ungate(pod, {"phalanx.io/plan": "n1:0,1"})  # type: ignore[arg-type]
    [sent] = api.writes
    assert sent.content_type == JSON_PATCH
    stored = {
        "metadata": {"uid": pod.uid, "annotations": {GATE_STAMP: "answered"}},
        "spec": {"schedulingGates": [GATE]},
    }
    after = apply(sent.body, stored)
    assert after["metadata"]["annotations"] == {GATE_STAMP: "answered", "phalanx.io/plan": "n1:0,1"}
    assert after["spec"]["schedulingGates"] == []


def test_an_unstamped_pod_gets_its_plan_merged_first_then_is_ungated() -> None:
    """Without the stamp the pod may have no annotation map to add to: a merge patch, guarded by UID."""
    api = FakeApi(read_only=False)
    pod = gated_pod(stamped=False)
    assert GateWriter(api).ungate(pod, {"phalanx.io/plan": "n1:0,1"})  # type: ignore[arg-type]
    merge, ungate = api.writes
    assert (merge.content_type, merge.body) == (
        MERGE_PATCH,
        {"metadata": {"uid": pod.uid, "annotations": {"phalanx.io/plan": "n1:0,1"}}},
    )
    assert ungate.content_type == JSON_PATCH


def test_an_unstamped_pod_re_created_meanwhile_is_not_ungated() -> None:
    api = FakeApi(read_only=False, replies=[ConflictError(409, "Conflict", "the UID in the precondition")])
    assert not GateWriter(api).ungate(gated_pod(stamped=False), {"phalanx.io/plan": "n1:0"})  # type: ignore[arg-type]
    assert len(api.sent) == 1, "no ungate patch after the refused plan"
