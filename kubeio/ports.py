"""What the drivers read from and write to the cluster, declared once: the ports.

The extender, the placement manager and the node agent depend on these shapes, not on the classes behind
them, so a unit test hands them an in-memory fake and production hands them the real adapter named in
each docstring. Each port has one fake: ``tests/builders.py`` (the cluster, binder, plan writer, events,
clock), ``tests/placement/fakes.py`` (MPIJobs, pins, deletes), ``tests/kubeio/fake_api.py`` (the API
boundary itself, ``kubeio.http.JsonRequester``, declared beside ``KubeHttp``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from kubeio.binding import BindStatus
from kubeio.events import ObjectRef
from kubeio.mpijobs import MpiJob
from kubeio.secrets import StoredSecret
from kubeio.webhook_configs import WebhookConfiguration
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.elastic.attained import Attained
from scheduling.leadership import LeaseRecord
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


class EventQueue(Protocol):
    """Queues an event (``kubeio.events.EventRecorder``), for a caller that takes no action on its own."""

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Queue one event (a reason: written off the caller's path)."""


class EventSink(EventQueue, Protocol):
    """Records events, an action's before the action (``kubeio.events.EventRecorder``)."""

    def record_now(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Write one event before returning (an action's, called before the action)."""


class PodToucher(Protocol):
    """Bumps an annotation on a pod (``kubeio.binding.PodBinder.touch``)."""

    def touch(self, namespace: str, name: str, key: str, value: str) -> None:
        """Merge-patch one annotation."""


class PodNominator(Protocol):
    """Writes a pod's ``status.nominatedNodeName`` (``kubeio.nominations.NominationWriter``)."""

    def nominate(self, namespace: str, name: str, uid: str, node: str | None) -> bool:
        """Nominate ``node`` (``None`` clears) for the pod with ``uid``; ``False`` if that pod is gone."""


class Pinner(Protocol):
    """Pins pods and taints pool nodes (``kubeio.pins.PinWriter``)."""

    def pin_pod(self, namespace: str, name: str, uid: str, node: str) -> bool:
        """Add the toleration for ``node``."""

    def taint_node(self, node: str, *, present: bool) -> bool:
        """Put the pin taint on or take it off."""

    def open_pool(self, namespace: str, name: str, uid: str) -> bool:
        """Let a pod that is no pinned worker use pool nodes."""


class ConfigAccess(Protocol):
    """Reads configurations and writes their CA bundle (``kubeio.webhook_configs.WebhookConfigs``)."""

    def read(self, name: str) -> WebhookConfiguration | None:
        """The configuration, or ``None`` if it does not exist."""

    def set_ca_bundle(self, name: str, webhooks: Sequence[str], bundle: bytes) -> None:
        """Set ``caBundle`` on the named webhooks."""


class JobReader(Protocol):
    """Reads an MPIJob and its workers from the API server (``kubeio.mpijobs.MpiJobWriter``)."""

    def get(self, namespace: str, name: str) -> MpiJob | None:
        """The MPIJob, or ``None``."""

    def workers(self, namespace: str, name: str) -> tuple[Pod, ...]:
        """Its worker pods, by replica index."""


class LeaseStore(Protocol):
    """The Lease in the API server (``kubeio.lease.LeaseClient``)."""

    def read(self) -> LeaseRecord | None:
        """The Lease now, or ``None``."""

    def create(self, holder: str, duration_seconds: int) -> bool:
        """Create it held by ``holder``; ``False`` if another was first."""

    def write(self, holder: str, duration_seconds: int, *, taking: bool) -> bool:
        """Renew or take over the Lease last read; ``False`` if it changed since."""

    def release(self, holder: str) -> None:
        """Give it up if ``holder`` holds it."""


class SecretAccess(Protocol):
    """Reads and writes one Secret (``kubeio.secrets.SecretStore``)."""

    def read(self, namespace: str, name: str) -> StoredSecret | None:
        """The Secret, or ``None``."""

    def create(self, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> bool:
        """Create it; ``False`` if it exists already."""

    def update(self, secret: StoredSecret, data: Mapping[str, bytes]) -> bool:
        """Replace its data; ``False`` if it changed since read."""


class MpiJobLister(Protocol):
    """Lists MPIJobs (``kubeio.mpijobs.MpiJobWriter``)."""

    def list(self) -> list[MpiJob]:
        """Every MPIJob."""


class MpiJobSource(MpiJobLister, Protocol):
    """Lists MPIJobs and resizes them (``kubeio.mpijobs.MpiJobWriter``)."""

    def update(
        self,
        namespace: str,
        name: str,
        *,
        replicas: int | None = None,
        plan: str | None = None,
        samples: str | None = None,
        moved_at: float | None = None,
        attained: Attained | None = None,
    ) -> None:
        """Set ``Worker.replicas``, show the plan, keep samples and service, record a move: one write."""


class Ungater(Protocol):
    """Removes the admission gate from one pod (``kubeio.gate_patches.GateWriter``)."""

    def ungate(self, pod: Pod, annotations: Mapping[str, str] = ...) -> bool:
        """``True`` once the gate is gone, ``annotations`` set with it; ``False``: gone or changed."""


class Annotator(Protocol):
    """Writes pod annotations, in one patch (:class:`kubeio.node_pods.PodAnnotator`)."""

    def set(self, namespace: str, name: str, uid: str, annotations: Mapping[str, str]) -> None:
        """Write them together; raises ``KubeError``."""


class AnnotationStore(Protocol):
    """Reads and merge-patches one annotation of a node (:class:`kubeio.node_annotations.NodeAnnotations`)."""

    def get(self, node: str, key: str) -> str | None:
        """The annotation's value, ``None`` when absent; raises ``KubeError`` on failure."""
        ...

    def patch(self, node: str, key: str, value: str | None) -> str:
        """Set the annotation and return the node's new ``resourceVersion``; raises ``KubeError``."""
        ...
