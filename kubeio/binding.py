"""Binding pods to nodes through the ``pods/binding`` subresource.

The Binding carries the pod's UID as a precondition (a re-created pod with the same name is never bound
by mistake) and the chosen GPU indices as annotations, which the API server merges into the pod in the
same write, so ``spec.nodeName`` and ``phalanx.io/gpus`` appear together (docs/design/extender-protocol.md
§4.2). The reply is a ``Status``, which the generated client cannot decode (§6); ``KubeHttp`` reads it as
plain JSON, so a successful bind is never mistaken for a failure.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from urllib.parse import quote

from kubeio.convert import ConvertError, pod_from_api
from kubeio.errors import ConflictError, KubeError, NotFoundError
from kubeio.http import KubeHttp
from scheduling.model import Pod


class BindStatus(enum.Enum):
    """How a bind ended when it did not raise."""

    BOUND = "bound"
    """This call bound the pod."""
    ALREADY_BOUND = "already_bound"
    """The pod was already bound to the requested node (a retry); nothing changed."""


class BindRefusedError(KubeError):
    """The API server refused the Binding for a reason a retry will not fix as is."""


def _pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}"


class PodBinder:
    """Creates Bindings and reads single pods; the extender's only writes to the API."""

    def __init__(self, http: KubeHttp, *, timeout: float = 20.0) -> None:
        self._http = http
        self._timeout = timeout

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        """Read one pod from the API server; ``None`` if it does not exist or cannot be read."""
        try:
            raw = self._http.request("GET", _pod_path(namespace, name), timeout=self._timeout)
        except NotFoundError:
            return None
        try:
            return pod_from_api(raw)
        except ConvertError:
            return None

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> BindStatus:
        """Bind pod ``namespace/name`` with UID ``uid`` to ``node``, merging ``annotations`` into it.

        Idempotent: a 409 because the pod is already on ``node`` is success (kube-scheduler retries a
        bind whose reply it did not get; docs/design/extender-protocol.md §2.6, §6).

        Raises:
            BindRefusedError: the pod is on another node, was re-created, or is being deleted.
            KubeError: the API server could not be reached or failed.
        """
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "annotations": dict(annotations),
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            self._http.request(
                "POST", _pod_path(namespace, name) + "/binding", body=body, timeout=self._timeout
            )
        except ConflictError as exc:
            current = self.get_pod(namespace, name)
            if current is not None and current.uid == uid and current.node_name == node:
                return BindStatus.ALREADY_BOUND
            raise BindRefusedError(exc.status, exc.reason, exc.message) from exc
        except NotFoundError as exc:
            raise BindRefusedError(
                exc.status, exc.reason, f"pod {namespace}/{name} no longer exists"
            ) from exc
        return BindStatus.BOUND

    def node_gone(self, node: str) -> str:
        """Why ``node`` cannot take a Binding now, read from the API server (``""`` when it can).

        The API server does not check a Binding's node: a pod bound to a node deleted a moment ago is
        deleted by the pod garbage collector later. The caches learn of a deletion a watch lag late (a
        quarter to half a second on a busy control plane); one GET narrows that to a round trip. If the
        read fails nothing is known, and ``""`` lets the Binding go ahead as it would have.
        """
        try:
            raw = self._http.request("GET", f"/api/v1/nodes/{quote(node, safe='')}", timeout=self._timeout)
        except NotFoundError:
            return f"node {node} was deleted"
        except KubeError:
            return ""
        meta, status = raw.get("metadata") or {}, raw.get("status") or {}
        if meta.get("deletionTimestamp"):
            return f"node {node} is being deleted"
        ready = [
            c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "Ready"
        ]
        if not ready or ready[0].get("status") != "True":
            return f"node {node} is not Ready"
        return ""

    def touch(self, namespace: str, name: str, key: str, value: str) -> None:
        """Merge-patch one annotation on a pod, so kube-scheduler sees an update and retries it.

        Raises:
            KubeError: the pod is gone or the API server failed.
        """
        body = {"metadata": {"annotations": {key: value}}}
        self._http.request(
            "PATCH",
            _pod_path(namespace, name),
            body=body,
            content_type="application/merge-patch+json",
            timeout=self._timeout,
        )
