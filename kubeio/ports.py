"""What the drivers read from and write to the cluster, declared once.

The extender and the placement manager depend on these shapes, not on the classes behind them, so a
unit test hands them an in-memory fake (``tests/builders.py``) and production hands them the real
adapters named in each docstring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kubeio.binding import BindStatus
from kubeio.events import ObjectRef
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod


class ClusterSource(Protocol):
    """The cluster as the core sees it (``kubeio.cluster_cache.ClusterCache``)."""

    def snapshot(self) -> ClusterSnapshot:
        """Everything, as one immutable value."""


class PodReader(Protocol):
    """Reads one pod from the API server when the cache has not seen it (``kubeio.binding.PodBinder``)."""

    def get_pod(self, namespace: str, name: str) -> Pod | None:
        """The pod, or ``None`` if it does not exist."""


class Binder(PodReader, Protocol):
    """Creates Bindings (``kubeio.binding.PodBinder``)."""

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> BindStatus:
        """Bind the pod with ``uid`` to ``node``, merging ``annotations`` into it."""


class PodDeleter(Protocol):
    """Deletes pods (``kubeio.podgroups.PodGroupWriter``)."""

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        """Delete one pod if it still has ``uid``; return whether a delete was sent."""


class PlanWriter(PodDeleter, Protocol):
    """Writes a gang's bind plan and rolls members back (``kubeio.podgroups.PodGroupWriter``)."""

    def set_plan(self, namespace: str, name: str, plan: str | None) -> None:
        """Write or remove the plan annotation."""


class RecoveryWriter(PlanWriter, Protocol):
    """What gang recovery reads and writes (``kubeio.podgroups.PodGroupWriter``)."""

    def list_members(self, namespace: str, name: str) -> tuple[Pod, ...]:
        """Every pod labelled for the PodGroup, finished ones included, read from the API server.

        Raises:
            KubeError: the list failed (recovery then tries again later).
        """


class GroupStatusSink(PodDeleter, Protocol):
    """Writes PodGroup status and evicts members (``kubeio.podgroups.PodGroupWriter``)."""

    def set_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Merge a PodGroup status."""


class QueueSink(Protocol):
    """Writes queue status (``kubeio.queue_objects.QueueWriter``)."""

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        """Merge a queue's status."""


class EventSink(Protocol):
    """Records an event (``kubeio.events.EventRecorder``)."""

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue one event (a reason: written off the caller's path)."""

    def record_now(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Write one event before returning (an action's, called before the action)."""
