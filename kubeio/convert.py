"""API JSON -> the core's model.

Pure functions over the dictionaries the API server (or kube-scheduler's extender request) sends. They
validate what they read: a wrongly typed field raises ``ConvertError`` with the field's path, which the
extender turns into HTTP 400 and the cache into a logged, skipped object. The field readers live in
``kubeio.api_fields`` (``ConvertError`` and ``api_parts`` are re-exported here for the other converters),
the fields of kube-scheduler's own node filters in ``kubeio.convert_constraints``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypedDict

from kubeio.api_fields import ApiParts
from kubeio.api_fields import ConvertError as ConvertError
from kubeio.api_fields import api_parts as api_parts
from kubeio.api_fields import int_field as _int
from kubeio.api_fields import labels_field as _labels
from kubeio.api_fields import list_field as _list
from kubeio.api_fields import obj_field as _obj
from kubeio.api_fields import str_field as _str
from kubeio.convert_constraints import affinity_of, node_selector_of, taints_of, tolerations_of
from kubeio.native_podgroups import scheduling_group_of
from kubeio.progress import THROUGHPUT_ANNOTATION, clip_report
from scheduling.model import (
    DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
    GANG_PLAN_ANNOTATION,
    GATE_STAMP,
    GPU_RESOURCE,
    GPUS_ANNOTATION,
    GROUP_LABEL,
    MAX_NODE_GPUS,
    PIN_KEY,
    PLAN_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    UNHEALTHY_GPUS_ANNOTATION,
    Node,
    Pod,
    PodGroup,
    Resources,
)
from scheduling.quantity import QuantityError, to_milli, to_units
from scheduling.topology import NodeTopology, TopologyCache, TopologyError, from_json


def resources_of(value: object, where: str) -> Resources:
    """Convert a ``ResourceList`` (``{"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "2"}``)."""
    raw = _obj(value, where)
    try:
        return Resources(
            milli_cpu=to_milli(raw["cpu"]) if "cpu" in raw else 0,
            memory=to_units(raw["memory"]) if "memory" in raw else 0,
            gpus=to_units(raw[GPU_RESOURCE]) if GPU_RESOURCE in raw else 0,
        )
    except QuantityError as exc:
        msg = f"{where}: {exc}"
        raise ConvertError(msg) from None


def _add(a: Resources, b: Resources) -> Resources:
    return Resources(a.milli_cpu + b.milli_cpu, a.memory + b.memory, a.gpus + b.gpus)


def _max(a: Resources, b: Resources) -> Resources:
    return Resources(max(a.milli_cpu, b.milli_cpu), max(a.memory, b.memory), max(a.gpus, b.gpus))


def _container_requests(container: object, where: str) -> Resources:
    resources = _obj(_obj(container, where, optional=False).get("resources"), f"{where}.resources")
    requests = resources_of(resources.get("requests"), f"{where}.resources.requests")
    limits = resources_of(resources.get("limits"), f"{where}.resources.limits")
    # Extended resources may be given as limits only; the API server copies them into requests, but
    # kube-scheduler's request may come from a client that did not, so take whichever says more.
    return Resources(requests.milli_cpu, requests.memory, max(requests.gpus, limits.gpus))


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """The effective requests of a pod spec, as kube-scheduler computes them.

    App containers add up; an init container runs alone, so the pod needs the larger of the two.
    """
    total = Resources()
    for i, container in enumerate(_list(spec.get("containers"), "spec.containers")):
        total = _add(total, _container_requests(container, f"spec.containers[{i}]"))
    for i, container in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        total = _max(total, _container_requests(container, f"spec.initContainers[{i}]"))
    return total


_INDEX_TEXT = len(",".join(str(i) for i in range(MAX_NODE_GPUS)))
"""The longest well-formed ``phalanx.io/gpus`` text: every index of the largest node, once."""


def parse_gpu_indices(text: object) -> tuple[int, ...] | None:
    """Parse ``phalanx.io/gpus`` ("0,1,5"); ``None`` when absent or malformed.

    Malformed includes an index no node can have (``MAX_NODE_GPUS`` and up), a repeated index, and
    text longer than every index of the largest node: such a pod holds GPUs without an index (counted,
    never matched to one), and its text costs no more than that bound to read.

    >>> parse_gpu_indices("3,1")
    (1, 3)
    >>> parse_gpu_indices("x") is None, parse_gpu_indices("²") is None, parse_gpu_indices("64") is None
    (True, True, True)
    """
    if not isinstance(text, str) or not text or len(text) > _INDEX_TEXT:
        return None
    parts = text.split(",")
    if not all(part.isascii() and part.isdigit() for part in parts):
        return None
    indices = tuple(sorted(int(part) for part in parts))
    if indices[-1] >= MAX_NODE_GPUS or len(set(indices)) != len(indices):
        return None
    return indices


def format_gpu_indices(indices: tuple[int, ...]) -> str:
    """The annotation value for ``indices``; the inverse of ``parse_gpu_indices``."""
    return ",".join(str(i) for i in sorted(indices))


def parse_plan(text: object) -> tuple[str, tuple[int, ...]] | None:
    """Parse ``phalanx.io/plan`` ("n1:0,1"; "n1:" for a pod without GPUs); ``None`` when absent or malformed.

    >>> parse_plan("n1:3,1"), parse_plan("n1:"), parse_plan("n1"), parse_plan(":0"), parse_plan("n1:x")
    (('n1', (1, 3)), ('n1', ()), None, None, None)
    """
    if not isinstance(text, str):
        return None
    node, colon, gpus = text.partition(":")
    if not colon or not node:
        return None
    if not gpus:
        return node, ()
    indices = parse_gpu_indices(gpus)
    return None if indices is None else (node, indices)


def format_plan(node: str, gpus: tuple[int, ...]) -> str:
    """The ``phalanx.io/plan`` value for ``node`` and ``gpus``; the inverse of ``parse_plan``."""
    return f"{node}:{format_gpu_indices(gpus)}"


PlanCheck = Callable[[str, Mapping[str, str]], float | None]
"""When phalanx sealed the plan in these annotations of a pod ("namespace/name"), or ``None`` when it
did not (``kubeio.plan_seal.PlanSeal.sealed_at``)."""


def pod_from_api(raw: object, plan_check: PlanCheck | None = None) -> Pod:
    """Convert a v1 Pod.

    With ``plan_check``, a plan that fails it is no plan (``Pod.plan`` is ``None``): the release pass
    then plans the pod itself, as the framework sidecar follows no plan its author could not seal; one
    that passes has the time it was sealed (``Pod.planned_at``).

    Raises:
        ConvertError: a required field is missing or a field has the wrong type.
    """
    parts = api_parts(raw, "pod")
    meta, spec, status, annotations = parts.metadata, parts.spec, parts.status, parts.annotations
    node_name = _str(spec.get("nodeName"), "spec.nodeName")
    priority = _int(spec.get("priority"), "spec.priority")
    labels = _labels(meta.get("labels"), "metadata.labels")
    return Pod(
        uid=_str(meta.get("uid"), "metadata.uid", required=True),
        namespace=_str(meta.get("namespace"), "metadata.namespace", required=True),
        name=_str(meta.get("name"), "metadata.name", required=True),
        requests=pod_requests(spec),
        node_name=node_name or None,
        gpu_indices=parse_gpu_indices(annotations.get(GPUS_ANNOTATION)),
        phase=_str(status.get("phase"), "status.phase") or "Pending",
        scheduler_name=_str(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler",
        terminating=meta.get("deletionTimestamp") is not None,
        labels=labels,
        priority=priority,
        created=_str(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        # Kubernetes' own reference first: it is the field the API server and kube-scheduler read.
        group=scheduling_group_of(spec) or labels.get(GROUP_LABEL) or None,
        started_at=_epoch(status.get("startTime")),
        pinned=_pins(spec.get("tolerations")),
        tolerates_pool=any(
            isinstance(t, dict) and t.get("operator") == "Exists" and t.get("key") in (PIN_KEY, None, "")
            for t in _list(spec.get("tolerations"), "spec.tolerations")
        ),
        node_selector=node_selector_of(spec),
        tolerations=tolerations_of(spec),
        affinity=affinity_of(spec),
        gates=scheduling_gates(spec),
        gate_stamped=GATE_STAMP in annotations,
        **_plan(parts, plan_check),
        unschedulable=_unschedulable(status),
        progress=clip_report(annotations.get(THROUGHPUT_ANNOTATION)),
        nominated_node=_str(status.get("nominatedNodeName"), "status.nominatedNodeName") or None,
    )


class _PlanFields(TypedDict):
    plan: tuple[str, tuple[int, ...]] | None
    planned_at: float | None


def _plan(parts: ApiParts, check: PlanCheck | None) -> _PlanFields:
    plan = parse_plan(parts.annotations.get(PLAN_ANNOTATION))
    if plan is None or check is None:
        return {"plan": plan, "planned_at": None}
    at = check(f"{parts.metadata.get('namespace')}/{parts.metadata.get('name')}", parts.annotations)
    return {"plan": plan if at is not None else None, "planned_at": at}


def _unschedulable(status: Mapping[str, Any]) -> bool:
    """Whether the pod's ``PodScheduled`` condition says kube-scheduler's last try found no node."""
    conditions = status.get("conditions")
    return isinstance(conditions, list) and any(
        isinstance(c, dict)
        and c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in conditions
    )


def scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of ``spec.schedulingGates``, in order (a pod's gates are removed by index).

    Raises:
        ConvertError: the list or one of its entries has the wrong shape.
    """
    names = []
    for i, gate in enumerate(_list(spec.get("schedulingGates"), "spec.schedulingGates")):
        where = f"spec.schedulingGates[{i}]"
        names.append(_str(_obj(gate, where, optional=False).get("name"), f"{where}.name", required=True))
    return tuple(names)


def _epoch(text: object) -> float | None:
    """RFC 3339 text (``2026-11-22T09:16:55Z``) -> seconds since the epoch; ``None`` if absent or odd."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def node_topology(
    annotation: str | None, topologies: TopologyCache
) -> tuple[NodeTopology | None, str | None]:
    """Read a ``phalanx.io/gpu-topology`` annotation: the prepared topology, or why it is unusable."""
    if annotation is None:
        return None, None
    try:
        return topologies.topology(from_json(annotation)), None
    except TopologyError as exc:
        return None, f"annotation {TOPOLOGY_ANNOTATION} is unreadable: {exc}"


def node_from_api(raw: object, topologies: TopologyCache | None = None) -> Node:
    """Convert a v1 Node, with its GPU topology prepared through ``topologies`` (shared across nodes).

    Raises:
        ConvertError: a required field is missing or a field has the wrong type.
    """
    parts = api_parts(raw, "node")
    meta, spec, status, annotations = parts.metadata, parts.spec, parts.status, parts.annotations
    ready = False
    for i, condition in enumerate(_list(status.get("conditions"), "status.conditions")):
        cond = _obj(condition, f"status.conditions[{i}]", optional=False)
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
    name = _str(meta.get("name"), "metadata.name", required=True)
    allocatable = resources_of(status.get("allocatable"), "status.allocatable")
    gpu_problem = None
    if allocatable.gpus > MAX_NODE_GPUS:
        gpu_problem = (
            f"node {name} advertises {allocatable.gpus} {GPU_RESOURCE}, more than phalanx models "
            f"({MAX_NODE_GPUS} per node); phalanx places nothing there and counts none of its capacity"
        )
        allocatable = Resources(allocatable.milli_cpu, allocatable.memory, 0)
    topology, problem = node_topology(annotations.get(TOPOLOGY_ANNOTATION), topologies or TopologyCache())
    return Node(
        name=name,
        allocatable=allocatable,
        labels=_labels(meta.get("labels"), "metadata.labels"),
        unschedulable=bool(spec.get("unschedulable", False)),
        ready=ready,
        topology=topology,
        topology_problem=problem,
        pin_taint=any(
            isinstance(t, dict) and t.get("key") == PIN_KEY for t in _list(spec.get("taints"), "spec.taints")
        ),
        taints=taints_of(spec),
        unhealthy_gpus=frozenset(parse_gpu_indices(annotations.get(UNHEALTHY_GPUS_ANNOTATION)) or ()),
        gpu_problem=gpu_problem,
    )


def _pins(value: object) -> frozenset[str]:
    """The nodes a pod's ``phalanx.io/hostname`` tolerations pin it to (``Exists`` pins nothing)."""
    pins = set()
    for i, item in enumerate(_list(value, "spec.tolerations")):
        toleration = _obj(item, f"spec.tolerations[{i}]", optional=False)
        if toleration.get("key") == PIN_KEY and toleration.get("operator", "Equal") == "Equal":
            node = _str(toleration.get("value"), f"spec.tolerations[{i}].value")
            if node:
                pins.add(node)
    return frozenset(pins)


def podgroup_from_api(raw: object) -> PodGroup:
    """Convert a scheduler-plugins ``scheduling.x-k8s.io/v1alpha1`` PodGroup.

    Raises:
        ConvertError: a required field is missing or a field has the wrong type.
    """
    parts = api_parts(raw, "podgroup")
    meta, spec, status, annotations = parts.metadata, parts.spec, parts.status, parts.annotations
    return PodGroup(
        namespace=_str(meta.get("namespace"), "metadata.namespace", required=True),
        name=_str(meta.get("name"), "metadata.name", required=True),
        min_member=_int(spec.get("minMember"), "spec.minMember", default=1, minimum=1),
        # 0 means unset: the MPI Operator writes 0 when the MPIJob sets no scheduleTimeoutSeconds.
        timeout_seconds=_int(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds", minimum=0)
        or DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
        plan=annotations.get(GANG_PLAN_ANNOTATION),
        phase=_str(status.get("phase"), "status.phase"),
        uid=_str(meta.get("uid"), "metadata.uid"),
        counts=(
            _int(status.get("scheduled"), "status.scheduled", minimum=0),
            _int(status.get("running"), "status.running", minimum=0),
            _int(status.get("succeeded"), "status.succeeded", minimum=0),
            _int(status.get("failed"), "status.failed", minimum=0),
        ),
    )
