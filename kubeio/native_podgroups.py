"""Kubernetes' own gangs: the ``scheduling.k8s.io`` PodGroup read into the core's one ``PodGroup``.

Kubernetes v1.36 serves a Workload API of its own, alpha and off by default (gates ``GenericWorkload``,
``GangScheduling``, ``WorkloadWithJob``; group version ``scheduling.k8s.io/v1alpha2``): a ``PodGroup``
whose ``spec.schedulingPolicy.gang.minCount`` says how many members must start together (``basic``
instead: no gang), and pods that join it by reference, ``spec.schedulingGroup.podGroupName``, not by a
label. With ``WorkloadWithJob`` the Job controller creates a Workload and one such PodGroup for an
indexed Job whose parallelism equals its completions, and sets the reference on every pod it creates.

phalanx reads this PodGroup into the same ``scheduling.model.PodGroup`` as the scheduler-plugins one
(``native=True``), so both inputs meet one gang model: the same plan, barrier, eviction, status pass and
``phalanx why``. What differs is only where things are written: the bind plan annotation goes on this
object, and the gang's status becomes a condition of phalanx's own, ``phalanx.io/Gang`` (the API's own
status has no phase or counts), whose reason is the phase and whose message carries the counts so that
the status pass reads back what it wrote and does not rewrite an unchanged status. The API's condition
``PodGroupScheduled`` stays kube-scheduler's: its gang plugin (gate ``GangScheduling``) writes it for
every profile, phalanx's included, and two writers of one condition would overwrite each other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from kubeio.api_fields import ConvertError, api_parts, int_field, list_field, obj_field, str_field
from scheduling.model import DEFAULT_SCHEDULE_TIMEOUT_SECONDS, GANG_PLAN_ANNOTATION, PodGroup

NATIVE_GROUP_VERSION = "scheduling.k8s.io/v1alpha2"
"""Where Kubernetes v1.36 serves Workload and PodGroup (alpha: only with ``--runtime-config``)."""

NATIVE_PODGROUPS_PATH = f"/apis/{NATIVE_GROUP_VERSION}/podgroups"
"""The cluster-wide collection the caches list and watch (optional: absent where the API is off)."""

GANG_CONDITION = "phalanx.io/Gang"
"""phalanx's condition on a native PodGroup: status ``True`` once the gang was placed whole, reason the
gang's phase, message the member counts."""

_PLACED = frozenset({"Scheduled", "Running", "Finished"})
"""Phases in which the gang's requirement was met (``scheduling.gang.status``)."""

_COUNTS = re.compile(r"^phalanx: (\d+) scheduled, (\d+) running, (\d+) succeeded, (\d+) failed$")


def native_podgroup_path(namespace: str, name: str) -> str:
    """The URL path of one ``scheduling.k8s.io`` PodGroup."""
    namespace, name = quote(namespace, safe=""), quote(name, safe="")
    return f"/apis/{NATIVE_GROUP_VERSION}/namespaces/{namespace}/podgroups/{name}"


def scheduling_group_of(spec: Mapping[str, Any]) -> str | None:
    """The PodGroup a pod names in ``spec.schedulingGroup.podGroupName``, if it names one.

    Raises:
        ConvertError: the field has the wrong shape.
    """
    group = obj_field(spec.get("schedulingGroup"), "spec.schedulingGroup")
    return str_field(group.get("podGroupName"), "spec.schedulingGroup.podGroupName") or None


def native_podgroup_from_api(raw: object) -> PodGroup:
    """Convert a ``scheduling.k8s.io/v1alpha2`` PodGroup into the core's gang.

    ``gang.minCount`` is the gang's minimum; a ``basic`` policy (no gang: each pod on its own) is a
    group of minimum 1. The API has no schedule timeout, so the default wait applies.

    Raises:
        ConvertError: a required field is missing or a field has the wrong type.
    """
    parts = api_parts(raw, "podgroup")
    meta, spec, status, annotations = parts.metadata, parts.spec, parts.status, parts.annotations
    policy = obj_field(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
    gang = obj_field(policy.get("gang"), "spec.schedulingPolicy.gang")
    minimum = int_field(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount", default=1, minimum=1)
    phase, counts = _read_status(status)
    return PodGroup(
        namespace=str_field(meta.get("namespace"), "metadata.namespace", required=True),
        name=str_field(meta.get("name"), "metadata.name", required=True),
        min_member=minimum,
        timeout_seconds=DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
        plan=annotations.get(GANG_PLAN_ANNOTATION),
        phase=phase,
        uid=str_field(meta.get("uid"), "metadata.uid"),
        counts=counts,
        native=True,
    )


def _read_status(status: Mapping[str, Any]) -> tuple[str, tuple[int, int, int, int]]:
    """The phase and counts phalanx last wrote in ``phalanx.io/Gang``; ("", zeros) when it wrote none."""
    for i, item in enumerate(list_field(status.get("conditions"), "status.conditions")):
        condition = obj_field(item, f"status.conditions[{i}]")
        if condition.get("type") != GANG_CONDITION:
            continue
        match = _COUNTS.match(str_field(condition.get("message"), f"status.conditions[{i}].message"))
        if match is None:  # edited by someone else: not phalanx's figures, so they are written again
            return "", (0, 0, 0, 0)
        scheduled, running, succeeded, failed = (int(g) for g in match.groups())
        reason = str_field(condition.get("reason"), f"status.conditions[{i}].reason")
        return reason, (scheduled, running, succeeded, failed)
    return "", (0, 0, 0, 0)


def native_status(status: Mapping[str, object], now: float) -> dict[str, Any]:
    """The status patch for a native PodGroup: phalanx's gang status as its ``phalanx.io/Gang`` condition.

    Args:
        status: what ``kubeio.render.podgroup_status`` renders (phase and the four counts).
        now: the wall clock, for ``lastTransitionTime`` (seconds since the epoch).

    Raises:
        ConvertError: ``status`` lacks the phase or a count (a programming error, said loudly).
    """
    try:
        phase = str(status["phase"])
        counts = [int(str(status[k])) for k in ("scheduled", "running", "succeeded", "failed")]
    except (KeyError, ValueError) as exc:
        msg = f"a gang status needs a phase and four counts: {exc}"
        raise ConvertError(msg) from exc
    condition = {
        "type": GANG_CONDITION,
        "status": "True" if phase in _PLACED else "False",
        "reason": phase or "Pending",
        "message": "phalanx: {} scheduled, {} running, {} succeeded, {} failed".format(*counts),
        "lastTransitionTime": datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"status": {"conditions": [condition]}}
