"""Pins: the taint that keeps a pool node for the workers planned onto it, and the toleration of one worker.

Every node of the managed pool carries the taint ``phalanx.io/hostname=<node>`` (effect ``NoSchedule``
unless the admin asks for another): kube-scheduler's own taint filter then keeps away every pod that
does not tolerate it. A worker the placement manager planned onto node N gets exactly one toleration,
``phalanx.io/hostname=N``, so the only pool node it may go to is N (Voda's design with ``NoSchedule``,
so nothing already running is evicted: docs/design/elastic-mpi.md §3). Tolerations may be added to an
existing pod, never removed; a worker to move elsewhere is deleted and its operator re-creates it, unpinned.

Writes are read-modify-write with the object's ``resourceVersion`` as a precondition (JSON patch
``test``), so a concurrent change is never overwritten: the write fails with a conflict and the next
reconcile round tries again from what the API server then holds.
"""

from __future__ import annotations

from typing import Any

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject, KubeHttp
from scheduling.model import PIN_KEY

JSON_PATCH = "application/json-patch+json"
PIN_EFFECT = "NoSchedule"


def pin_taint(node: str, effect: str = PIN_EFFECT) -> JsonObject:
    """The taint a pool node carries."""
    return {"key": PIN_KEY, "value": node, "effect": effect}


def pin_toleration(node: str, effect: str = PIN_EFFECT) -> JsonObject:
    """The toleration that pins a pod to ``node``."""
    return {"key": PIN_KEY, "operator": "Equal", "value": node, "effect": effect}


def pool_toleration() -> JsonObject:
    """The toleration that opens every pool node to a pod (any pin, any effect)."""
    return {"key": PIN_KEY, "operator": "Exists"}


def with_pin_taint(taints: list[Any], node: str, *, present: bool, effect: str = PIN_EFFECT) -> list[Any]:
    """``taints`` with the node's pin taint present (once, with ``effect``) or absent; others untouched.

    >>> [t["key"] for t in with_pin_taint([{"key": "a", "effect": "NoSchedule"}], "n1", present=True)]
    ['a', 'phalanx.io/hostname']
    >>> with_pin_taint([{"key": "phalanx.io/hostname", "value": "n1"}], "n1", present=False)
    []
    """
    others = [t for t in taints if not (isinstance(t, dict) and t.get("key") == PIN_KEY)]
    return [*others, pin_taint(node, effect)] if present else others


class PinWriter:
    """Adds pins to pods and keeps pin taints on nodes, through the API server."""

    def __init__(self, http: KubeHttp, *, timeout: float = 20.0, effect: str = PIN_EFFECT) -> None:
        self._http = http
        self._timeout = timeout
        self._effect = effect

    def pin_pod(self, namespace: str, name: str, uid: str, node: str) -> bool:
        """Add the toleration for ``node`` to the pod with ``uid``; ``False`` if that pod is gone.

        A pod that already tolerates ``node`` is left as it is (a repeated round writes nothing).

        Raises:
            KubeError: the pod changed meanwhile (the resourceVersion test failed), or the API failed;
                the next round tries again.
        """
        return self._tolerate(namespace, name, uid, pin_toleration(node, self._effect))

    def open_pool(self, namespace: str, name: str, uid: str) -> bool:
        """Let a pod that is no pinned worker use pool nodes (``Exists``); ``False`` if it is gone.

        Raises:
            KubeError: the pod changed meanwhile, or the API failed; the next round tries again.
        """
        return self._tolerate(namespace, name, uid, pool_toleration())

    def _tolerate(self, namespace: str, name: str, uid: str, wanted: JsonObject) -> bool:
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            pod = self._http.request("GET", path, timeout=self._timeout)
        except NotFoundError:
            return False
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if meta.get("uid") != uid:
            return False
        tolerations: list[Any] = list(spec.get("tolerations") or [])
        if wanted in tolerations:
            return True
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
            {
                "op": "add" if "tolerations" not in spec else "replace",
                "path": "/spec/tolerations",
                "value": [*tolerations, wanted],
            },
        ]
        self._patch(path, patch)
        return True

    def taint_node(self, node: str, *, present: bool) -> bool:
        """Put the pin taint on ``node`` or take it off; return whether anything was written.

        Raises:
            KubeError: the node changed meanwhile (the resourceVersion test failed), or the API failed;
                the next round tries again.
        """
        path = f"/api/v1/nodes/{node}"
        current = self._http.request("GET", path, timeout=self._timeout)
        meta, spec = current.get("metadata") or {}, current.get("spec") or {}
        taints: list[Any] = list(spec.get("taints") or [])
        wanted = with_pin_taint(taints, node, present=present, effect=self._effect)
        if wanted == taints:
            return False
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
            {"op": "add" if "taints" not in spec else "replace", "path": "/spec/taints", "value": wanted},
        ]
        self._patch(path, patch)
        return True

    def _patch(self, path: str, patch: list[Any]) -> None:
        self._http.request("PATCH", path, body=patch, content_type=JSON_PATCH, timeout=self._timeout)
