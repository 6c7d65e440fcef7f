"""The core's values as the API's JSON: event objects, annotations and status bodies, rendered once.

The core decides in its own records (``scheduling.model``, ``scheduling.gang.status``,
``scheduling.queues.view``); only this adapter knows the API's field names.
"""

from __future__ import annotations

from typing import Any

from kubeio.convert import format_gpu_indices
from kubeio.events import ObjectRef
from scheduling.gang.status import GangStatus
from scheduling.model import GPUS_ANNOTATION, Pod, PodGroup
from scheduling.queues.view import QueueView, pending_of
from scheduling.resources import CPU, GPU, MEMORY, amount, format_quantity

PODGROUP_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
NATIVE_PODGROUP_API_VERSION = "scheduling.k8s.io/v1alpha2"


def pod_ref(pod: Pod) -> ObjectRef:
    """The pod as the object of an event."""
    return ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid)


def podgroup_ref(group: PodGroup) -> ObjectRef:
    """The PodGroup (of either kind) as the object of an event."""
    version = NATIVE_PODGROUP_API_VERSION if group.native else PODGROUP_API_VERSION
    return ObjectRef("PodGroup", version, group.namespace, group.name, group.uid)


PLAN_GANG_ANNOTATION = "phalanx.io/plan-gang"
"""Pod annotation written with the plans of a gang's pods released together: ``<count>:<group name>``.
The framework sidecar's Permit holds each of them until that many of the gang's pods are placed
(``sidecar/plan/gang.go``)."""


def plan_gang_annotations(group: str, count: int) -> dict[str, str]:
    """The barrier of ``count`` pods of gang ``group`` ("namespace/name") planned together.

    >>> plan_gang_annotations("ml/train", 4)
    {'phalanx.io/plan-gang': '4:train'}
    """
    return {PLAN_GANG_ANNOTATION: f"{count}:{group.partition('/')[2]}"}


def gpu_annotations(gpus: tuple[int, ...]) -> dict[str, str]:
    """The annotations a Binding merges into a pod given ``gpus`` (none for a pod without GPUs)."""
    return {GPUS_ANNOTATION: format_gpu_indices(gpus)} if gpus else {}


def podgroup_status(status: GangStatus) -> dict[str, object]:
    """The ``status`` object to merge into a PodGroup."""
    return {
        "phase": status.phase,
        "scheduled": status.scheduled,
        "running": status.running,
        "succeeded": status.succeeded,
        "failed": status.failed,
    }


def queue_status(view: QueueView, name: str) -> dict[str, Any]:
    """Queue ``name``'s status: allocated, deserved, fair share and pending per resource, and ``Valid``.

    A queue set aside (``view.tree.rejected``) has no figures (they are removed: it is in no share) and
    ``Valid=False`` with its own reason; every queue in force has ``Valid=True``, whatever the others.
    """
    rejected = view.tree.rejected.get(name)
    status: dict[str, Any] = {}
    if name in view.tree.queues:
        state, share = view.states[name], view.shares[name]
        pending = pending_of(view, name)
        for resource, key in ((GPU, "gpu"), (CPU, "cpu"), (MEMORY, "memory")):
            values = {
                "allocated": amount(state.allocated, resource),
                "deserved": amount(share.deserved, resource),
                "fairShare": amount(share.fair_share, resource),
                "pending": amount(pending, resource),
            }
            status[key] = (
                values if resource == GPU else {k: format_quantity(resource, v) for k, v in values.items()}
            )
    else:
        status.update(gpu=None, cpu=None, memory=None)  # a merge patch's null removes the old figures
    status["conditions"] = [
        {"type": "Valid", "status": "True", "reason": "Valid", "message": "the queue is in force"}
        if rejected is None
        else {
            "type": "Valid",
            "status": "False",
            "reason": "SetAside",
            "message": f"{rejected} (every queue not below it stays in force)",
        }
    ]
    return status
