"""Objects phalanx refuses, each with its reason: kept so that someone says so on the object itself.

The caches convert every object on its own (``kubeio.cluster_cache``): one that cannot be read (a field
of the wrong shape, a value no parser takes) or that phalanx will not model (a node advertising more
GPUs than ``scheduling.model.MAX_NODE_GPUS``) is refused and every other object is unaffected. A log
line alone is silent to the user, so each refusal is kept here, keyed by the object, until the object is
fixed or deleted, and the placement manager's leader turns each into a Warning event on the object
(``placement.refusal_pass``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeio.events import ObjectRef

API_VERSIONS = {
    "Node": "v1",
    "Pod": "v1",
    "PodGroup": "scheduling.x-k8s.io/v1alpha1",
    "PodGroup.scheduling.k8s.io": "scheduling.k8s.io/v1alpha2",
    "Queue": "scheduling.phalanx.io/v1alpha1",
    "MPIJob": "kubeflow.org/v2beta1",
}
"""The API version of each kind phalanx reads, for the events it records about them."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """One object phalanx refuses.

    Attributes:
        kind: ``Node``, ``Pod``, ``PodGroup``, ``Queue`` or ``MPIJob``.
        namespace: its namespace ("" for a cluster-scoped kind).
        name: its name.
        uid: its UID ("" when unreadable).
        reason: why, naming the field or the limit, for the event.
    """

    kind: str
    namespace: str
    name: str
    uid: str
    reason: str

    @property
    def key(self) -> str:
        """``namespace/name``, or the name of a cluster-scoped object."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def ref(self) -> ObjectRef:
        """The object as the subject of an event."""
        kind = self.kind.partition(".")[0]  # "PodGroup.scheduling.k8s.io" is a PodGroup of that group
        return ObjectRef(kind, API_VERSIONS[self.kind], self.namespace, self.name, self.uid)


def object_key(raw: object) -> str:
    """``namespace/name`` of raw API JSON, or the name of a cluster-scoped object (as ``Refusal.key``)."""
    namespace, name, _ = identity(raw)
    return f"{namespace}/{name}" if namespace else name


def refusal_of(kind: str, raw: object, reason: str) -> Refusal:
    """The refusal of the object ``raw`` of ``kind`` for ``reason``."""
    namespace, name, uid = identity(raw)
    return Refusal(kind, namespace, name or "?", uid, reason)


def identity(raw: object) -> tuple[str, str, str]:
    """(namespace, name, uid) of raw API JSON, each "" when missing or not a string.

    Read without the converters, so that an object no converter can read can still be named (and, when
    it is deleted, forgotten).

    >>> identity({"metadata": {"namespace": "ml", "name": "w0", "uid": "u1"}}), identity({"metadata": 3})
    (('ml', 'w0', 'u1'), ('', '', ''))
    """
    meta: Any = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict):
        return "", "", ""
    parts = (meta.get("namespace"), meta.get("name"), meta.get("uid"))
    namespace, name, uid = (part if isinstance(part, str) else "" for part in parts)
    return namespace, name, uid


class RefusalBook:
    """The refusals standing now, one per object (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_object: dict[tuple[str, str], Refusal] = {}

    def refuse(self, refusal: Refusal) -> bool:
        """Record ``refusal`` (replacing an older one of the object); return whether it is new."""
        with self._lock:
            before = self._by_object.get((refusal.kind, refusal.key))
            self._by_object[(refusal.kind, refusal.key)] = refusal
        return before != refusal

    def standing(self, kind: str, key: str) -> Refusal | None:
        """The refusal of the object ``key`` of ``kind``, if one stands."""
        with self._lock:
            return self._by_object.get((kind, key))

    def clear(self, kind: str, key: str) -> None:
        """The object is readable again, or gone: it is refused no more."""
        with self._lock:
            self._by_object.pop((kind, key), None)

    def replace(self, kind: str, refusals: Mapping[str, Refusal]) -> None:
        """After a list of ``kind``: exactly ``refusals`` (by key) stand for that kind."""
        with self._lock:
            kept = {k: r for k, r in self._by_object.items() if k[0] != kind}
            kept.update(((kind, key), refusal) for key, refusal in refusals.items())
            self._by_object = kept

    def all(self) -> tuple[Refusal, ...]:
        """Every refusal standing, sorted by kind and key."""
        with self._lock:
            return tuple(self._by_object[k] for k in sorted(self._by_object))
