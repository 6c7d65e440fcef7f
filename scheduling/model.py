"""The core's view of the cluster: nodes, pods and resources as frozen, integer-valued records.

The adapter (``kubeio.convert``) turns API JSON into these records once, when an object changes, so
that every decision in the hot path reads plain attributes instead of nested dictionaries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from scheduling.topology import TOPOLOGY_ANNOTATION as DOCUMENT_ANNOTATION
from scheduling.topology import NodeTopology
from scheduling.topology.document import MAX_GPUS

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource name the NVIDIA device plugin advertises."""

MAX_NODE_GPUS = MAX_GPUS
"""The most GPUs phalanx models on one node (64, as many as a topology document describes): above any
real machine (the largest single systems have 16), and a bound on what one node costs to keep, since
phalanx keeps one entry per GPU index. A node that advertises more is refused (``Node.gpu_problem``)."""

GPUS_ANNOTATION = "phalanx.io/gpus"
"""Pod annotation, written in the Binding, that lists the GPU indices phalanx gave the pod ("0,1")."""

TOPOLOGY_ANNOTATION = DOCUMENT_ANNOTATION
"""Node annotation holding the node's GPU topology document (see ``scheduling.topology``)."""

UNHEALTHY_GPUS_ANNOTATION = "phalanx.io/unhealthy-gpus"
"""Node annotation, written by the node agent, listing the GPU indices NVML reported failing ("3,5");
phalanx gives them to no pod (the kubelet's allocatable already counts them out)."""

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
"""Pod label naming the pod's PodGroup (scheduler-plugins convention, used by MPI Operator v2)."""

QUEUE_LABEL = "phalanx.io/queue"
"""Pod and PodGroup label naming the workload's (leaf) queue; absent means ``DEFAULT_QUEUE``."""

DEFAULT_QUEUE = "default"
"""The cluster-wide queue of workloads that name none; created implicitly with quota 0 and weight 1."""

KUEUE_PODSET_LABEL = "kueue.x-k8s.io/podset"
"""Pod label Kueue stamps on the pod templates of every workload it admits (``kueue.x-k8s.io/podset``:
the pod set's name, e.g. ``worker``), so every pod of an admitted job carries it. Such a pod's quota is
Kueue's: phalanx places it but charges it to none of its own queues (docs/kueue.md)."""

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""Label that submits a job (an MPIJob, a Job) to a Kueue LocalQueue: Kueue suspends it until admitted."""

PIN_KEY = "phalanx.io/hostname"
"""Taint key on nodes of the managed pool (value: the node's name) and toleration key on a pod pinned to
one of them: the placement manager pins an elastic job's worker to its planned node this way."""

GANG_PLAN_ANNOTATION = "phalanx.io/gang-plan"
"""PodGroup annotation holding the bind plan while a gang is being bound (crash recovery)."""

ADMISSION_GATE = "phalanx.io/admission"
"""Scheduling gate (``spec.schedulingGates``) the placement manager's webhook adds to every pod of
scheduler ``phalanx`` at creation: kube-scheduler ignores the pod until the leader removes it, group by
group, in the queues' fair order (``scheduling.admission.release``)."""

PLAN_ANNOTATION = "phalanx.io/plan"
"""Pod annotation, written by the release pass as it ungates the pod when plans are carried on pods
(``GateSettings.plan_on_pod``): the node and GPU indices it planned ("n1:0,1"). The framework sidecar's
plugin places the pod there (docs/design/framework-sidecar.md)."""

GATE_STAMP = "phalanx.io/gate-webhook"
"""Annotation the gate webhook puts on every pod of scheduler ``phalanx`` it answers for as the pod is
created (value ``answered``): such a pod without it was created around the webhook
(``placement.bypass_pass``)."""

DEFAULT_SCHEDULE_TIMEOUT_SECONDS = 60
"""scheduler-plugins' default for ``spec.scheduleTimeoutSeconds``."""

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
"""Pod phases in which a pod no longer holds resources on its node."""

SCHEDULER_NAME = "phalanx"
"""``spec.schedulerName`` of the pods phalanx schedules, queues and admits."""

EMPTY_LABELS: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Taint:
    """A node's taint (``spec.taints[]``): pods that do not tolerate it keep off the node.

    Attributes:
        key: the taint's key.
        value: its value ("" when it has none).
        effect: ``NoSchedule``, ``PreferNoSchedule`` or ``NoExecute``.
    """

    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        """``key=value:effect`` (``key:effect`` without a value), as ``kubectl describe node`` shows it.

        >>> str(Taint("gpu", "reserved")), str(Taint("dedicated", effect="NoExecute"))
        ('gpu=reserved:NoSchedule', 'dedicated:NoExecute')
        """
        value = f"={self.value}" if self.value else ""
        return f"{self.key}{value}:{self.effect}"


@dataclass(frozen=True, slots=True)
class Toleration:
    """One of a pod's ``spec.tolerations[]``.

    Attributes:
        key: the taint key it tolerates; "" (with ``Exists``) tolerates every key.
        operator: ``Equal`` (the value must match) or ``Exists`` (any value).
        value: the value for ``Equal``.
        effect: the effect it tolerates; "" tolerates every effect.
    """

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    """One requirement of a required node-affinity term (``matchExpressions`` or ``matchFields``).

    Attributes:
        key: the node label (``metadata.name`` for a ``matchFields`` requirement).
        operator: ``In``, ``NotIn``, ``Exists``, ``DoesNotExist``, ``Gt`` or ``Lt``.
        values: the values the operator compares with.
        on_name: a ``matchFields`` requirement, on the node's name (the only field it may name), rather
            than on its labels.
    """

    key: str
    operator: str
    values: tuple[str, ...] = ()
    on_name: bool = False


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A term of ``requiredDuringSchedulingIgnoredDuringExecution``: every requirement must hold."""

    requirements: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Resources:
    """An amount of schedulable resources, in integer units.

    Attributes:
        milli_cpu: CPU in thousandths of a core.
        memory: memory in bytes.
        gpus: whole ``nvidia.com/gpu`` devices.
    """

    milli_cpu: int = 0
    memory: int = 0
    gpus: int = 0


@dataclass(frozen=True, slots=True)
class Pod:
    """One pod as the scheduler needs it.

    Attributes:
        uid: the API object's UID; a re-created pod with the same name has a new one.
        namespace: the pod's namespace.
        name: the pod's name.
        requests: the effective requests (max of init containers and sum of app containers).
        node_name: ``spec.nodeName`` once bound, else ``None``.
        gpu_indices: the indices of ``phalanx.io/gpus`` when present and well formed, else ``None``.
        phase: ``status.phase``.
        scheduler_name: ``spec.schedulerName``.
        terminating: the pod has a deletion timestamp; it still holds its resources until it is gone.
        labels: the pod's labels.
        priority: ``spec.priority`` (0 when unset).
        created: ``metadata.creationTimestamp`` as RFC 3339 text (sorts chronologically).
        group: the name of the pod's PodGroup (label ``scheduling.x-k8s.io/pod-group``), if any.
        started_at: ``status.startTime`` in seconds since the epoch, once the pod runs.
        pinned: the nodes its ``phalanx.io/hostname`` tolerations name (``Equal``); empty: not pinned.
        tolerates_pool: it tolerates every pin taint (``phalanx.io/hostname``, ``Exists``): the elastic
            pool is open to it.
        node_selector: ``spec.nodeSelector``: labels a node must carry.
        tolerations: ``spec.tolerations``.
        affinity: the terms of its required node affinity (any one must hold); empty: none.
        gates: the names of ``spec.schedulingGates``, in order (a gate is removed by its index).
        gate_stamped: it carries ``GATE_STAMP``: the gate webhook answered for it as it was created.
        nominated_node: ``status.nominatedNodeName``: the node kube-scheduler tries first (phalanx's
            nomination, or kube-scheduler's own after a preemption); ``None``: none.
        plan: the node and GPU indices of its ``phalanx.io/plan`` when present and well formed, else
            ``None``.
        planned_at: when phalanx sealed that plan (``kubeio.plan_seal``; wall-clock seconds), ``None``
            when it is not known (no plan, or plans are not carried on pods).
        unschedulable: kube-scheduler's last try turned it down (its ``PodScheduled`` condition is
            ``False``, reason ``Unschedulable``).
        progress: the training-speed report its job's reporting process wrote on it, as written
            (``kubeio.progress``); ``None``: none. Kept as text: the elastic pass reads it, and a report
            that cannot be read is said on the job, not refused with the pod.
    """

    uid: str
    namespace: str
    name: str
    requests: Resources
    node_name: str | None = None
    gpu_indices: tuple[int, ...] | None = None
    phase: str = "Pending"
    scheduler_name: str = "default-scheduler"
    terminating: bool = False
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS, compare=False)
    priority: int = 0
    created: str = ""
    group: str | None = None
    started_at: float | None = None
    pinned: frozenset[str] = frozenset()
    tolerates_pool: bool = False
    node_selector: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS, compare=False)
    tolerations: tuple[Toleration, ...] = ()
    affinity: tuple[NodeSelectorTerm, ...] = ()
    gates: tuple[str, ...] = ()
    gate_stamped: bool = False
    plan: tuple[str, tuple[int, ...]] | None = None
    planned_at: float | None = None
    unschedulable: bool = False
    progress: str | None = None
    nominated_node: str | None = None

    @property
    def key(self) -> str:
        """``namespace/name``, the name users and events know the pod by."""
        return f"{self.namespace}/{self.name}"

    @property
    def gated(self) -> bool:
        """It carries the gate ``phalanx.io/admission``: kube-scheduler does not try it until released."""
        return ADMISSION_GATE in self.gates

    @property
    def group_key(self) -> str | None:
        """``namespace/group`` of the pod's PodGroup, or ``None`` for a pod on its own."""
        return None if self.group is None else f"{self.namespace}/{self.group}"

    @property
    def holds_resources(self) -> bool:
        """Whether the pod occupies its node: bound and not finished."""
        return self.node_name is not None and self.phase not in TERMINAL_PHASES

    @property
    def quota_by_kueue(self) -> bool:
        """Whether Kueue admitted this pod's workload and so owns its quota (``KUEUE_PODSET_LABEL``)."""
        return KUEUE_PODSET_LABEL in self.labels

    @property
    def in_queues(self) -> bool:
        """Whether the queue rules walk this pod: live, and phalanx's or carrying phalanx's gate.

        Every other live pod only takes capacity away from all queues, so a cluster state can keep those
        as one running sum (``ClusterSnapshot.held_elsewhere``) and the queue view walks only these.
        """
        return self.phase not in TERMINAL_PHASES and (
            self.scheduler_name == SCHEDULER_NAME or ADMISSION_GATE in self.gates
        )


def group_key(pod: Pod) -> str:
    """The key a pod is admitted, placed and evicted under: its PodGroup's, else its own."""
    return pod.group_key or pod.key


@dataclass(frozen=True, slots=True)
class Node:
    """One node as the scheduler needs it.

    Attributes:
        name: the node's name.
        allocatable: ``status.allocatable`` in integer units.
        labels: the node's labels (zone, rack, ...).
        unschedulable: ``spec.unschedulable`` (cordoned).
        ready: the ``Ready`` condition is ``True``.
        topology: the node's prepared GPU topology, from its ``phalanx.io/gpu-topology`` annotation, or
            ``None`` when the node has none (phalanx then treats its GPUs as interchangeable).
        topology_problem: why the annotation could not be used, when it is present but unreadable;
            phalanx then places no GPU pod there, since its GPU indices cannot be trusted.
        pin_taint: the node carries the ``phalanx.io/hostname`` taint of the elastic pool.
        taints: ``spec.taints``, the pin taint among them.
        unhealthy_gpus: the indices of ``phalanx.io/unhealthy-gpus``: GPUs no pod may be given.
        gpu_problem: why phalanx refuses the node: it advertises more GPUs than ``MAX_NODE_GPUS``,
            which no real machine has (the adapter then keeps its ``allocatable.gpus`` at 0). Its
            capacity cannot be trusted, so phalanx places nothing there and counts none of it; the node
            stays known, so filter turns it down with this reason rather than as unknown.
    """

    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=lambda: EMPTY_LABELS, compare=False)
    unschedulable: bool = False
    ready: bool = True
    topology: NodeTopology | None = None
    topology_problem: str | None = None
    pin_taint: bool = False
    taints: tuple[Taint, ...] = ()
    unhealthy_gpus: frozenset[int] = frozenset()
    gpu_problem: str | None = None

    @property
    def takes_pods(self) -> bool:
        """Whether phalanx may place pods here now: Ready, not cordoned, and not refused (``gpu_problem``)."""
        return self.ready and not self.unschedulable and self.gpu_problem is None

    @property
    def _gpu_count(self) -> int:
        """How many GPU indices the node has, healthy or not."""
        if self.topology is not None:
            return self.topology.gpu_count
        return self.allocatable.gpus + len(self.unhealthy_gpus)

    @property
    def gpu_total(self) -> int:
        """How many GPUs the node offers (``len(gpu_indices)``, without building the set)."""
        count = self._gpu_count
        healthy = count - sum(1 for i in self.unhealthy_gpus if i < count)
        return min(self.allocatable.gpus, healthy)

    @property
    def gpu_indices(self) -> frozenset[int]:
        """The GPU indices the node offers, as NVML numbers them.

        The healthy indices (the topology document's GPUs, else as many as allocatable and unhealthy
        together), lowest first, cut to ``allocatable`` (the kubelet counts an unhealthy GPU out of
        allocatable; a GPU it counts out that phalanx was not told of costs the highest index).

        >>> from scheduling.model import Resources
        >>> sorted(Node("n", Resources(gpus=3), unhealthy_gpus=frozenset({1})).gpu_indices)
        [0, 2, 3]
        """
        if not self.unhealthy_gpus:
            return frozenset(range(self.gpu_total))
        usable = [i for i in range(self._gpu_count) if i not in self.unhealthy_gpus]
        return frozenset(usable[: self.allocatable.gpus])


@dataclass(frozen=True, slots=True)
class PodGroup:
    """A gang: pods that run all together or not at all.

    One model for both inputs: the scheduler-plugins ``PodGroup`` (``scheduling.x-k8s.io``, members
    labelled) and Kubernetes' own (``scheduling.k8s.io``, members named in ``spec.schedulingGroup``,
    ``native``); every decision about a gang reads only this record.

    Attributes:
        namespace: the group's namespace (its pods are in the same one).
        name: the group's name, which member pods carry in ``scheduling.x-k8s.io/pod-group`` (or, for a
            native group, in ``spec.schedulingGroup.podGroupName``).
        min_member: how many members must be placed at once.
        timeout_seconds: ``spec.scheduleTimeoutSeconds``: how long members wait for each other at bind.
        plan: the ``phalanx.io/gang-plan`` annotation when a bind is (or was) under way.
        phase: ``status.phase`` as last written.
        uid: the object's UID.
        counts: ``status`` (scheduled, running, succeeded, failed) as last written.
        native: declared by a ``scheduling.k8s.io`` PodGroup (only where it is written back differs).
    """

    namespace: str
    name: str
    min_member: int
    timeout_seconds: int = DEFAULT_SCHEDULE_TIMEOUT_SECONDS
    plan: str | None = None
    phase: str = ""
    uid: str = ""
    counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    native: bool = False

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"
