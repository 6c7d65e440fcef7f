"""The pods bound to one node, as the node agent needs them: GPU sets, GPU containers, bind order.

The device plugin must know which pods the kubelet may be admitting and which GPUs phalanx chose for
each (``phalanx.io/gpus``); the truth keeper must know which pods to compare with the kubelet's report.
Both read this one watch of ``spec.nodeName=<node>`` (the same selector the kubelet watches with, so
the pods arrive here in the order they arrive there), and :meth:`NodePods.refresh` re-lists on demand
when the kubelet asks about a pod this watch has not delivered yet.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from kubeio.api_fields import api_parts, list_field, obj_field, str_field
from kubeio.convert import ConvertError, parse_gpu_indices, pod_requests, resources_of
from kubeio.http import JsonObject, KubeHttp
from kubeio.reflector import Collection, Reflector, list_collection
from scheduling.model import GPUS_ANNOTATION, TERMINAL_PHASES

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodePod:
    """One pod bound to the node.

    Attributes:
        key: ``namespace/name``.
        uid: the pod's UID.
        annotated: the indices of ``phalanx.io/gpus``, ``None`` without a (well-formed) annotation.
        gpus: how many GPUs the pod requests (as kube-scheduler counts them).
        sizes: the GPU counts of its containers that request GPUs, in the kubelet's order (init first).
        listed: container name -> GPU count, for the containers PodResources lists (app containers and
            restartable init containers) that request GPUs.
        live: not Succeeded or Failed.
        order: the order in which this watch first saw the pod bound (ties: creation, name).
    """

    key: str
    uid: str
    annotated: tuple[int, ...] | None
    gpus: int
    sizes: tuple[int, ...]
    listed: MappingProxyType[str, int]
    live: bool
    order: int = 0

    @property
    def namespace(self) -> str:
        """The pod's namespace."""
        return self.key.split("/", 1)[0]

    @property
    def name(self) -> str:
        """The pod's name."""
        return self.key.split("/", 1)[1]


def _gpu_count(container: object, where: str) -> int:
    resources = obj_field(obj_field(container, where, optional=False).get("resources"), f"{where}.resources")
    requests = resources_of(resources.get("requests"), f"{where}.resources.requests")
    limits = resources_of(resources.get("limits"), f"{where}.resources.limits")
    return max(requests.gpus, limits.gpus)


def node_pod_from_api(raw: object, order: int = 0) -> NodePod:
    """Convert a v1 Pod.

    Raises:
        ConvertError: a required field is missing or has the wrong type.
    """
    parts = api_parts(raw, "pod")
    meta, spec, status = parts.metadata, parts.spec, parts.status
    sizes: list[int] = []
    listed: dict[str, int] = {}
    for field in ("initContainers", "containers"):
        for i, container in enumerate(list_field(spec.get(field), f"spec.{field}")):
            count = _gpu_count(container, f"spec.{field}[{i}]")
            if count <= 0:
                continue
            sizes.append(count)
            restartable = isinstance(container, dict) and container.get("restartPolicy") == "Always"
            if field == "containers" or restartable:
                listed[str_field(container.get("name"), f"spec.{field}[{i}].name")] = count
    namespace = str_field(meta.get("namespace"), "metadata.namespace", required=True)
    name = str_field(meta.get("name"), "metadata.name", required=True)
    return NodePod(
        key=f"{namespace}/{name}",
        uid=str_field(meta.get("uid"), "metadata.uid", required=True),
        annotated=parse_gpu_indices(parts.annotations.get(GPUS_ANNOTATION)),
        gpus=pod_requests(spec).gpus,
        sizes=tuple(sizes),
        listed=MappingProxyType(listed),
        live=str_field(status.get("phase"), "status.phase") not in TERMINAL_PHASES,
        order=order,
    )


class NodePods:
    """The pods of one node, kept by list/watch; thread-safe reads of an immutable snapshot."""

    def __init__(self, http: KubeHttp, node: str, *, on_change: Callable[[], None] | None = None) -> None:
        self._http = http
        self._collection = Collection("/api/v1/pods", field_selector=f"spec.nodeName={node}")
        self._lock = threading.Lock()
        self._pods: dict[str, NodePod] = {}
        self._uids: dict[str, str] = {}
        self._orders: dict[str, int] = {}
        self._next = 0
        self._on_change = on_change or (lambda: None)
        self.synced = threading.Event()
        """Set once the first list arrived."""

    def pods(self) -> MappingProxyType[str, NodePod]:
        """Every pod bound to the node, by ``namespace/name``."""
        with self._lock:
            return MappingProxyType(dict(self._pods))

    def refresh(self) -> None:
        """List the node's pods now (a consistent read), adding any the watch has not delivered yet.

        Raises:
            KubeError: the list failed.
        """
        items, _ = list_collection(self._http, self._collection)
        self._replace(items, forget=False)

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set (in the caller's thread)."""
        reflector = Reflector(
            self._http, self._collection, on_replace=self._replaced, on_event=self._event, stop=stop
        )
        reflector.run()

    def _replaced(self, items: list[JsonObject]) -> None:
        self._replace(items, forget=True)
        self.synced.set()

    def _replace(self, items: list[JsonObject], *, forget: bool) -> None:
        ordered = sorted(items, key=_creation)
        with self._lock:
            if forget:
                keep = {_uid(item) for item in items}
                self._orders = {uid: n for uid, n in self._orders.items() if uid in keep}
                self._pods, self._uids = {}, {}
            for item in ordered:
                self._put(item)
        self._on_change()

    def _event(self, kind: str, raw: JsonObject) -> None:
        with self._lock:
            if kind == "DELETED":
                uid = _uid(raw)
                self._orders.pop(uid, None)
                key = self._uids.pop(uid, None)
                if key is not None and self._pods.get(key) is not None and self._pods[key].uid == uid:
                    del self._pods[key]
            else:
                self._put(raw)
        self._on_change()

    def _put(self, raw: JsonObject) -> None:
        uid = _uid(raw)
        if uid not in self._orders:
            self._orders[uid] = self._next
            self._next += 1
        try:
            pod = node_pod_from_api(raw, self._orders[uid])
        except ConvertError as exc:
            log.warning("ignoring pod %s that the node agent cannot read: %s", _uid(raw), exc)
            return
        self._pods[pod.key] = pod
        self._uids[pod.uid] = pod.key


def _uid(raw: JsonObject) -> str:
    return str((raw.get("metadata") or {}).get("uid", ""))


def _creation(raw: JsonObject) -> tuple[str, str]:
    meta: dict[str, Any] = raw.get("metadata") or {}
    return str(meta.get("creationTimestamp", "")), str(meta.get("name", ""))


class PodAnnotator:
    """Merge-patches annotations of one pod in one write, only while the pod still has the given UID."""

    def __init__(self, http: KubeHttp, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    def set(self, namespace: str, name: str, uid: str, annotations: Mapping[str, str]) -> None:
        """Write ``annotations`` on the pod together (a re-created pod of that name is left alone).

        Raises:
            KubeError: the pod is gone, was re-created (409), or the API server failed.
        """
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        body = {"metadata": {"uid": uid, "annotations": dict(annotations)}}
        self._http.request(
            "PATCH", path, body=body, content_type="application/merge-patch+json", timeout=self._timeout
        )
