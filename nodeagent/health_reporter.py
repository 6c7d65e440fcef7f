"""What happens when NVML reports a GPU failing: the plugin stops offering it, phalanx stops choosing it.

The GPU is marked unhealthy in the table the plugin's ``ListAndWatch`` streams (the kubelet then
allocates it to no one and lowers the node's allocatable), its index is published as the node
annotation ``phalanx.io/unhealthy-gpus`` (so the extender's free indices leave it out, whichever plugin
serves the node), and every pod holding it gets a Warning event ``GPUUnhealthy``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from kubeio.errors import KubeError
from kubeio.events import ObjectRef
from kubeio.node_pods import NodePod
from kubeio.ports import AnnotationStore, EventQueue
from nodeagent.gpu_devices import GpuDevices
from nodeagent.node_metrics import NodeMetrics
from scheduling.model import UNHEALTHY_GPUS_ANNOTATION


class HealthReporter:
    """Receives :class:`~nodeagent.gpu_health.HealthWatcher` reports."""

    def __init__(
        self,
        devices: GpuDevices,
        store: AnnotationStore,
        node: str,
        recorder: EventQueue,
        *,
        held: Callable[[], Mapping[str, tuple[int, ...]]],
        pods: Callable[[], Mapping[str, NodePod]],
        metrics: NodeMetrics,
        log: logging.Logger | None = None,
    ) -> None:
        self._devices = devices
        self._store = store
        self._node = node
        self._recorder = recorder
        self._held = held
        self._pods = pods
        self._metrics = metrics
        self._log = log or logging.getLogger(__name__)
        self._unpublished = threading.Event()

    def on_unhealthy(self, uuid: str, reason: str) -> None:
        """GPU ``uuid`` failed for ``reason``."""
        index = self._devices.index_of(uuid)
        if index is None or not self._devices.mark_unhealthy(index, reason):
            return
        self._log.error("GPU %d (%s) of node %s is unhealthy: %s", index, uuid, self._node, reason)
        self._metrics.unhealthy_gpus.set(len(self._devices.unhealthy()))
        self.publish()
        pods = self._pods()
        for key, gpus in sorted(self._held().items()):
            pod = pods.get(key)
            if index not in gpus or pod is None:
                continue
            message = (
                f"GPU {index} ({uuid}) of node {self._node}, which this pod holds, is unhealthy: {reason}"
            )
            self._recorder.record(
                ObjectRef("Pod", "v1", pod.namespace, pod.name, pod.uid), "Warning", "GPUUnhealthy", message
            )

    def publish(self) -> bool:
        """Write the unhealthy indices on the node; ``False`` when the API refused (:meth:`run` retries)."""
        value = ",".join(str(i) for i in sorted(self._devices.unhealthy())) or None
        try:
            if self._store.get(self._node, UNHEALTHY_GPUS_ANNOTATION) != value:
                self._store.patch(self._node, UNHEALTHY_GPUS_ANNOTATION, value)
        except KubeError as exc:
            self._log.warning("could not publish the unhealthy GPUs of node %s: %s", self._node, exc)
            self._unpublished.set()
            return False
        self._unpublished.clear()
        return True

    def run(self, stop: threading.Event, *, retry_seconds: float = 5.0) -> None:
        """Publish again every ``retry_seconds`` while the last publish failed, until ``stop``."""
        while not stop.wait(retry_seconds):
            if self._unpublished.is_set():
                self.publish()
