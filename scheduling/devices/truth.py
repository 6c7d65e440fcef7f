"""What each pod really holds, compared with what ``phalanx.io/gpus`` says.

The kubelet's PodResources API reports, per pod and container, the device IDs its device manager gave
(the node agent maps them to GPU indices). That is the truth: the container runs on those GPUs whatever
the annotation says. A difference comes from a device plugin that ignored phalanx's choice (NVIDIA's,
or any topology-blind one), from a pod the plugin could not tell apart from another, or from a GPU pod
another scheduler placed (no annotation at all). Either way phalanx's accounting, which reads the
annotation (``scheduling.cluster.usage``), must follow the truth, or its next NVLink choices are made on
GPUs that are in fact taken. :func:`reconcile` says which pods to correct, and reports any GPU that two
pods hold (the kubelet's device manager never allows it; seeing one means the read is inconsistent).

Pure: the driver reads the API and the kubelet, applies the corrections and records events.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class PodDevices:
    """What the kubelet reports for one pod.

    Attributes:
        pod: ``namespace/name``.
        gpus: the GPU indices its containers hold, sorted (all containers together).
        pending: a container that requests GPUs holds none yet: the pod is being admitted.
        unknown: device IDs that map to no GPU index of this node (reported, never guessed).
    """

    pod: str
    gpus: tuple[int, ...]
    pending: bool = False
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod on the node as the API server has it.

    Attributes:
        pod: ``namespace/name``.
        uid: its UID (a correction is written only to this very pod).
        annotated: the indices of ``phalanx.io/gpus``, or ``None`` when it has none (or a malformed one).
        gpus: how many GPUs it requests.
        live: it is neither Succeeded nor Failed.
    """

    pod: str
    uid: str
    annotated: tuple[int, ...] | None
    gpus: int
    live: bool = True


class Kind(enum.Enum):
    """What kind of difference a correction repairs."""

    MISMATCH = "mismatch"
    """phalanx chose one set and the container got another."""
    UNANNOTATED = "unannotated"
    """A GPU pod phalanx did not place: its indices were unknown to phalanx until now."""


@dataclass(frozen=True, slots=True)
class Correction:
    """Write ``actual`` as the pod's ``phalanx.io/gpus``."""

    pod: str
    uid: str
    annotated: tuple[int, ...] | None
    actual: tuple[int, ...]
    kind: Kind

    def describe(self) -> str:
        """The sentence of the pod's event."""
        got = ",".join(map(str, self.actual))
        if self.kind is Kind.UNANNOTATED:
            return f"the kubelet gave this pod GPUs {got}; phalanx now counts them as taken"
        chose = ",".join(map(str, self.annotated or ()))
        return (
            f"phalanx chose GPUs {chose} but the kubelet gave the containers GPUs {got} (the device "
            f"plugin did not follow phalanx's choice); phalanx.io/gpus now says {got}"
        )


@dataclass(frozen=True, slots=True)
class TruthReport:
    """The outcome of one comparison.

    Attributes:
        corrections: the pods whose annotation must change, by pod name.
        held: every pod the kubelet reports holding GPUs, with the indices.
        held_twice: GPU index -> the pods that all report holding it (should never happen).
        unknown: pod -> device IDs that are no GPU of this node.
    """

    corrections: tuple[Correction, ...] = ()
    held: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))
    held_twice: Mapping[int, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    unknown: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))


def reconcile(truth: Iterable[PodDevices], pods: Mapping[str, PodRecord]) -> TruthReport:
    """Compare the kubelet's report with the API's pods.

    A pod is corrected when it is live, known to the API server, done with admission (no GPU container
    still waiting for devices) and holds a set that differs from its annotation. Pods the API server
    does not know (deleted a moment ago) and pods still being admitted are left for the next read.

    >>> pods = {"ns/a": PodRecord("ns/a", "u1", (0, 1), 2), "ns/b": PodRecord("ns/b", "u2", None, 1)}
    >>> report = reconcile([PodDevices("ns/a", (2, 3)), PodDevices("ns/b", (5,))], pods)
    >>> [(c.pod, c.actual, c.kind.value) for c in report.corrections]
    [('ns/a', (2, 3), 'mismatch'), ('ns/b', (5,), 'unannotated')]
    """
    corrections: list[Correction] = []
    held: dict[str, tuple[int, ...]] = {}
    holders: dict[int, list[str]] = {}
    unknown: dict[str, tuple[str, ...]] = {}
    for report in sorted(truth, key=lambda r: r.pod):
        if report.unknown:
            unknown[report.pod] = report.unknown
        if not report.gpus:
            continue
        held[report.pod] = report.gpus
        for index in report.gpus:
            holders.setdefault(index, []).append(report.pod)
        record = pods.get(report.pod)
        if record is None or not record.live or report.pending:
            continue
        if record.annotated != report.gpus:
            kind = Kind.UNANNOTATED if record.annotated is None else Kind.MISMATCH
            corrections.append(Correction(record.pod, record.uid, record.annotated, report.gpus, kind))
    twice = {index: tuple(names) for index, names in sorted(holders.items()) if len(names) > 1}
    return TruthReport(
        tuple(corrections),
        MappingProxyType(held),
        MappingProxyType(twice),
        MappingProxyType(unknown),
    )
