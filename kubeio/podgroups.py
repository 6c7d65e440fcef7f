"""Writes to PodGroups (the gang's bind plan annotation and its status) and pod deletion for rollback.

The plan annotation is written before a gang's first Binding, so a restarted extender can complete or
roll back a half-bound gang from what the API server holds (crash safety, docs/design/gang-scheduling.md §3).

A gang is declared either by a scheduler-plugins PodGroup or by Kubernetes' own
(``kubeio.native_podgroups``); the writer asks ``native`` (the cache's answer) which one a key is and
writes there: the same annotation, and for a native group the status as its ``phalanx.io/Gang``
condition.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from kubeio.convert import ConvertError, pod_from_api
from kubeio.errors import NotFoundError
from kubeio.http import KubeHttp
from kubeio.native_podgroups import native_podgroup_path, native_status
from scheduling.model import GANG_PLAN_ANNOTATION, GROUP_LABEL, Pod

log = logging.getLogger(__name__)

_MERGE = "application/merge-patch+json"
_STRATEGIC = "application/strategic-merge-patch+json"  # a built-in type: conditions merge by type


def podgroup_path(namespace: str, name: str) -> str:
    """The URL path of one PodGroup."""
    namespace, name = quote(namespace, safe=""), quote(name, safe="")
    return f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{namespace}/podgroups/{name}"


class PodGroupWriter:
    """Patches PodGroups and deletes member pods; every call is one API request."""

    def __init__(
        self,
        http: KubeHttp,
        *,
        timeout: float = 20.0,
        native: Callable[[str], bool] = lambda _key: False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Write through ``http``.

        Args:
            http: the API client.
            timeout: seconds per request.
            native: whether the gang ``namespace/name`` is declared by a ``scheduling.k8s.io`` PodGroup
                (``ClusterCache.is_native_group``).
            clock: the wall clock, for the native status condition's transition time.
        """
        self._http = http
        self._timeout = timeout
        self._native = native
        self._clock = clock

    def _path(self, namespace: str, name: str) -> str:
        if self._native(f"{namespace}/{name}"):
            return native_podgroup_path(namespace, name)
        return podgroup_path(namespace, name)

    def set_plan(self, namespace: str, name: str, plan: str | None) -> None:
        """Write (or with ``None`` remove) the gang's bind plan annotation.

        Raises:
            KubeError: the PodGroup could not be patched (the bind must not start then).
        """
        body = {"metadata": {"annotations": {GANG_PLAN_ANNOTATION: plan}}}
        self._http.request(
            "PATCH", self._path(namespace, name), body=body, content_type=_MERGE, timeout=self._timeout
        )

    def list_members(self, namespace: str, name: str) -> tuple[Pod, ...]:
        """Every member pod of PodGroup ``namespace/name``, finished ones included, by name.

        The extender's cache holds live pods only, so a member that was bound and has finished since is
        read here, from the API server. A pod that cannot be converted is left out with a log line. The
        members of a native group name it in a field no selector reaches, so the namespace's pods are
        listed and kept by the reference the converter read.
        """
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods"
        native = self._native(f"{namespace}/{name}")
        query = {} if native else {"labelSelector": f"{GROUP_LABEL}={name}"}
        listed = self._http.request("GET", path, query=query, timeout=self._timeout)
        pods = []
        for raw in listed.get("items") or ():
            try:
                pods.append(pod_from_api(raw))
            except ConvertError as exc:
                log.warning("gang %s/%s: a member cannot be read: %s", namespace, name, exc)
        pods = [p for p in pods if p.group == name]
        return tuple(sorted(pods, key=lambda p: p.name))

    def set_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge ``status`` into the PodGroup's status subresource (a native one: as its condition)."""
        if self._native(f"{namespace}/{name}"):
            path = native_podgroup_path(namespace, name) + "/status"
            body = native_status(status, self._clock())
            self._http.request("PATCH", path, body=body, content_type=_STRATEGIC, timeout=self._timeout)
            return
        path = podgroup_path(namespace, name) + "/status"
        self._http.request(
            "PATCH", path, body={"status": dict(status)}, content_type=_MERGE, timeout=self._timeout
        )

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        """Delete pod ``namespace/name`` if it still has ``uid``; ``False`` if it was already gone."""
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds
        try:
            self._http.request("DELETE", path, body=body, timeout=self._timeout)
        except NotFoundError:
            return False
        return True
