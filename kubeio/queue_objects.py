"""Queue objects (``queues.scheduling.phalanx.io``): API JSON -> ``scheduling.queues.Queue``, and status.

The CRD's own validation (manifests/crds) refuses negative amounts, a limit below the quota and
amounts that are no quantity at admission; what needs other queues (an unknown parent, cycles, depth,
children over their parent's quota) is judged by ``scheduling.queues.QueueTree.build``, which sets a bad
queue aside with its subtree, and reported in each queue's status condition ``Valid``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from kubeio.convert import ConvertError, api_parts
from kubeio.http import KubeHttp
from scheduling.quantity import QuantityError, to_milli, to_units
from scheduling.queues import Queue, ResourceQuota
from scheduling.resources import CPU, GPU, MEMORY

QUEUES_PATH = "/apis/scheduling.phalanx.io/v1alpha1/queues"
_MERGE = "application/merge-patch+json"


def _amount(resource: str, value: object, where: str) -> int:
    try:
        return to_milli(value) if resource == CPU else to_units(value)
    except QuantityError as exc:
        msg = f"{where}: {exc}"
        raise ConvertError(msg) from None


def _share(resource: str, raw: object, where: str) -> ResourceQuota:
    if raw is None:
        return ResourceQuota()
    if not isinstance(raw, dict):
        msg = f"{where} must be an object"
        raise ConvertError(msg)
    weight = raw.get("overQuotaWeight", 1)
    if not isinstance(weight, int) or isinstance(weight, bool):
        msg = f"{where}.overQuotaWeight must be an integer"
        raise ConvertError(msg)
    limit = raw.get("limit")
    return ResourceQuota(
        quota=_amount(resource, raw.get("quota", 0), f"{where}.quota"),
        over_quota_weight=weight,
        limit=None if limit is None else _amount(resource, limit, f"{where}.limit"),
    )


def queue_from_api(raw: object) -> Queue:
    """Convert a Queue object; one whose spec cannot be read comes back *refused*, not dropped.

    A refused queue keeps its name and, when readable, its parent, and carries the reason in
    ``Queue.problem``: the core sets it aside with its subtree and its status says why, where dropping it
    would silently orphan its children and send its pods to "queue does not exist".

    Raises:
        ConvertError: the object has no readable name (nothing can be said about it).
    """
    parts = api_parts(raw, "queue")
    meta, spec = parts.metadata, parts.spec
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        msg = "metadata.name must be a non-empty string"
        raise ConvertError(msg)
    parent = spec.get("parent")
    parent = parent if isinstance(parent, str) and parent else None
    created = str(meta.get("creationTimestamp") or "")
    try:
        return _queue(name, parent, spec, created)
    except ConvertError as exc:
        return Queue(name=name, parent=parent, created=created, problem=str(exc))


def _queue(name: str, parent: str | None, spec: Mapping[str, Any], created: str) -> Queue:
    resources = spec.get("resources") or {}
    if not isinstance(resources, dict):
        msg = "spec.resources must be an object"
        raise ConvertError(msg)
    runtime = spec.get("minRuntimeSeconds")
    if runtime is not None and (not isinstance(runtime, int) or isinstance(runtime, bool)):
        msg = "spec.minRuntimeSeconds must be an integer"
        raise ConvertError(msg)
    return Queue(
        name=name,
        parent=parent,
        gpu=_share(GPU, resources.get(GPU), f"spec.resources.{GPU}"),
        cpu=_share(CPU, resources.get(CPU), f"spec.resources.{CPU}"),
        memory=_share(MEMORY, resources.get(MEMORY), f"spec.resources.{MEMORY}"),
        min_runtime_seconds=runtime,
        created=created,
    )


class QueueWriter:
    """Writes Queue status."""

    def __init__(self, http: KubeHttp, *, timeout: float = 20.0) -> None:
        self._http = http
        self._timeout = timeout

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Merge ``status`` into queue ``name``'s status subresource."""
        path = f"{QUEUES_PATH}/{quote(name, safe='')}/status"
        self._http.request(
            "PATCH", path, body={"status": dict(status)}, content_type=_MERGE, timeout=self._timeout
        )
