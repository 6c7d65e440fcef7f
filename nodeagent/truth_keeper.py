"""Keep every pod's ``phalanx.io/gpus`` equal to the GPUs its containers really hold.

Each cycle reads the kubelet (:mod:`nodeagent.kubelet_view`) and the node's pods (the API), compares them
(``scheduling.devices.truth``) and writes each difference back as the pod's annotation, with an event on
the pod and a metric, so phalanx's accounting (which reads the annotation) follows the truth. A cycle
runs every ``interval`` seconds and at once when poked (after every ``Allocate``, after a pod changes),
so a difference is repaired within about a second of the kubelet's allocation.

A GPU held by two pods cannot come from the kubelet's device manager; it is logged as an error and
counted, never "corrected". Device IDs that are no GPU of this node are reported the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Protocol

import grpc

from kubeio.convert import format_gpu_indices
from kubeio.errors import KubeError
from kubeio.events import ObjectRef
from kubeio.node_pods import NodePod
from kubeio.ports import Annotator, EventQueue
from nodeagent.kubelet_view import KubeletView
from scheduling.devices.truth import Correction, Kind, PodRecord, TruthReport, reconcile
from scheduling.model import GPUS_ANNOTATION


class TruthMetrics(Protocol):
    """What the keeper counts."""

    def corrected(self, kind: Kind) -> None:
        """One annotation rewritten."""

    def read(self, ok: bool) -> None:
        """One read of the kubelet."""

    def held_twice(self, count: int) -> None:
        """GPUs reported held by two pods in the latest read."""


def records_of(pods: Mapping[str, NodePod]) -> dict[str, PodRecord]:
    """The API's pods in the core's terms."""
    return {key: PodRecord(key, p.uid, p.annotated, p.gpus, p.live) for key, p in pods.items()}


class TruthKeeper:
    """Reads the truth and repairs annotations; the latest view is shared with the device plugin."""

    def __init__(
        self,
        read: Callable[[Mapping[str, NodePod]], KubeletView],
        pods: Callable[[], Mapping[str, NodePod]],
        annotator: Annotator,
        recorder: EventQueue,
        metrics: TruthMetrics,
        *,
        node: str,
        interval: float = 1.0,
        log: logging.Logger | None = None,
    ) -> None:
        self._read = read
        self._pods = pods
        self._annotator = annotator
        self._recorder = recorder
        self._metrics = metrics
        self._node = node
        self._interval = interval
        self._log = log or logging.getLogger(__name__)
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._view: KubeletView | None = None
        self._written: dict[str, tuple[int, ...]] = {}
        self._failing = False

    def poke(self) -> None:
        """Run a cycle soon."""
        self._wake.set()

    @property
    def view(self) -> KubeletView | None:
        """The latest successful read, ``None`` before the first."""
        with self._lock:
            return self._view

    def held(self) -> Mapping[str, tuple[int, ...]]:
        """Pod -> the GPUs it holds, from the latest read."""
        view = self.view
        if view is None:
            return MappingProxyType({})
        return MappingProxyType({key: r.gpus for key, r in view.pods.items() if r.gpus})

    def admitting(self) -> frozenset[str] | None:
        """A fresh read of the pods the kubelet is admitting; ``None`` when the kubelet cannot be read."""
        view = self._try_read(self._pods())
        return None if view is None else view.admitting

    def run_once(self) -> TruthReport | None:
        """One cycle; ``None`` when the kubelet could not be read. Never raises ``Exception``."""
        pods = self._pods()
        view = self._try_read(pods)
        if view is None:
            return None
        report = reconcile(view.pods.values(), records_of(pods))
        self._metrics.held_twice(len(report.held_twice))
        for index, holders in report.held_twice.items():
            self._log.error(
                "node %s: the kubelet reports GPU %d held by %s at once", self._node, index, list(holders)
            )
        for key, ids in report.unknown.items():
            self._log.error(
                "node %s: pod %s holds devices %s that are no GPU of this node", self._node, key, list(ids)
            )
        live = {c.uid for c in report.corrections}
        self._written = {uid: gpus for uid, gpus in self._written.items() if uid in live}
        for correction in report.corrections:
            self._apply(correction)
        return report

    def _try_read(self, pods: Mapping[str, NodePod]) -> KubeletView | None:
        try:
            view = self._read(pods)
        except (grpc.RpcError, OSError) as exc:
            self._metrics.read(ok=False)
            if not self._failing:
                self._log.warning("cannot read the kubelet's PodResources: %s", exc)
            self._failing = True
            return None
        self._metrics.read(ok=True)
        if self._failing:
            self._log.info("the kubelet's PodResources answer again")
        self._failing = False
        with self._lock:
            self._view = view
        return view

    def _apply(self, correction: Correction) -> None:
        if self._written.get(correction.uid) == correction.actual:
            return  # written already; the watch has not brought the new annotation yet
        namespace, name = correction.pod.split("/", 1)
        try:
            self._annotator.set(
                namespace, name, correction.uid, {GPUS_ANNOTATION: format_gpu_indices(correction.actual)}
            )
        except KubeError as exc:
            self._log.warning("could not correct %s on pod %s: %s", GPUS_ANNOTATION, correction.pod, exc)
            return
        self._written[correction.uid] = correction.actual
        self._metrics.corrected(correction.kind)
        mismatch = correction.kind is Kind.MISMATCH
        (self._log.warning if mismatch else self._log.info)(
            "pod %s: %s", correction.pod, correction.describe()
        )
        ref = ObjectRef("Pod", "v1", namespace, name, correction.uid)
        reason = "GPUsCorrected" if mismatch else "GPUsRecorded"
        self._recorder.record(ref, "Warning" if mismatch else "Normal", reason, correction.describe())

    def run(self, stop: threading.Event) -> None:
        """Cycle until ``stop``: every ``interval`` seconds, or sooner when poked."""
        while not stop.is_set():
            self._wake.clear()
            try:
                self.run_once()
            except Exception:
                self._log.exception("checking what the kubelet gave each pod failed unexpectedly")
            self._wake.wait(self._interval)
