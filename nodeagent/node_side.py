"""The node agent's node-side duties, beside publishing the topology: truth, health, the device plugin.

* The **truth keeper** reads what each container really holds (the kubelet's PodResources) and makes
  ``phalanx.io/gpus`` follow it (:mod:`nodeagent.truth_keeper`), whichever plugin allocates.
* The **health watcher** turns NVML Xid events into unhealthy GPUs (:mod:`nodeagent.gpu_health`,
  :mod:`nodeagent.health_reporter`).
* With ``--device-plugin``, **phalanx's device plugin** serves ``nvidia.com/gpu`` so the kubelet gives each
  container the GPUs phalanx chose (:mod:`nodeagent.deviceplugin`).

All three need the node's GPU table (index <-> UUID), so they start once NVML has been read; each runs
in a daemon thread of its own and never stops the agent.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from prometheus_client import start_http_server

from kubeio.events import EventRecorder
from kubeio.http import KubeHttp
from kubeio.node_annotations import NodeAnnotations
from kubeio.node_pods import NodePod, NodePods, PodAnnotator
from nodeagent.agent_settings import AgentSettings
from nodeagent.deviceplugin.outcomes import PluginOutcomes
from nodeagent.deviceplugin.plugin import GpuDevicePlugin
from nodeagent.deviceplugin.server import PluginServer
from nodeagent.gpu_devices import GpuDevices
from nodeagent.gpu_health import HealthWatcher, NvmlEvents
from nodeagent.health_reporter import HealthReporter
from nodeagent.kubelet_view import KubeletReader, KubeletView
from nodeagent.node_metrics import NodeMetrics
from nodeagent.nvml_reader import NvmlReading
from nodeagent.truth_keeper import TruthKeeper
from scheduling.devices.claims import DeviceClaim, best_available
from scheduling.topology import TopologyCache, TopologyDocument, prepare_topology

log = logging.getLogger("nodeagent.node_side")


def claims_of(pods: Mapping[str, NodePod], view: KubeletView | None) -> list[DeviceClaim]:
    """The GPU pods the kubelet may be admitting: live, requesting GPUs, not known to hold them yet.

    A pod whose annotation names as many GPUs as it requests is phalanx's (its set); any other GPU pod
    is one phalanx did not place.
    """
    allocated = view.allocated if view is not None else frozenset()
    claims = []
    for key, pod in pods.items():
        if not pod.live or not pod.sizes or (key in allocated and view is not None and view.pods[key].gpus):
            continue
        placed = pod.annotated if pod.annotated is not None and len(pod.annotated) == pod.gpus else ()
        claims.append(DeviceClaim(key, placed, pod.sizes, pod.order))
    return claims


class NodeSide:
    """Starts the truth keeper, the health watcher and, when asked, the device plugin."""

    def __init__(
        self,
        settings: AgentSettings,
        http: KubeHttp,
        read: Callable[[], NvmlReading],
        nvml: NvmlEvents,
    ) -> None:
        assert settings.node_name is not None
        self._settings = settings
        self._node = settings.node_name
        self._http = http
        self._read = read
        self._nvml = nvml
        self.metrics = NodeMetrics()
        self.pods = NodePods(http, self._node, on_change=lambda: self._poke())
        self._poke: Callable[[], None] = lambda: None
        self.server: PluginServer | None = None

    def start(self, stop: threading.Event) -> None:
        """Start everything in daemon threads; the GPU table is read first, retrying until NVML answers."""
        if self._settings.metrics_port:
            start_http_server(self._settings.metrics_port, registry=self.metrics.registry)
        _thread("node-pods", lambda: self.pods.run(stop))
        _thread("node-side", lambda: self._run(stop))

    def _document(self, stop: threading.Event) -> TopologyDocument | None:
        delay = 1.0
        while not stop.is_set():
            reading = self._read()
            if reading.document is not None:
                return reading.document
            log.warning("no GPU table yet (%s); node-side duties wait %.0fs", reading.detail, delay)
            stop.wait(delay)
            delay = min(delay * 2, 60.0)
        return None

    def _run(self, stop: threading.Event) -> None:
        document = self._document(stop)
        if document is None:
            return
        settings = self._settings
        devices = GpuDevices.from_document(document)
        recorder = EventRecorder(self._http, component="phalanx-node-agent", clock=time.time)
        recorder.start(stop)
        reader = KubeletReader(settings.pod_resources_socket, devices)
        keeper = TruthKeeper(
            reader.read,
            self.pods.pods,
            PodAnnotator(self._http, timeout=settings.api_timeout_seconds),
            recorder,
            self.metrics,
            node=self._node,
            interval=settings.truth_interval_seconds,
        )
        if settings.pod_resources_socket:
            self._poke = keeper.poke
            _thread("truth", lambda: keeper.run(stop))
        health = HealthReporter(
            devices,
            NodeAnnotations(self._http, timeout=settings.api_timeout_seconds),
            self._node,
            recorder,
            held=keeper.held,
            pods=self.pods.pods,
            metrics=self.metrics,
        )
        health.publish()
        _thread("gpu-health-publisher", lambda: health.run(stop))
        watcher = HealthWatcher(self._nvml, [d.uuid for d in devices.devices], health.on_unhealthy)
        _thread("gpu-health", lambda: watcher.run(stop))
        if settings.device_plugin:
            self._serve_plugin(document, devices, keeper, recorder, stop)
        log.info(
            "node side of %s: %d GPUs, truth %s, device plugin %s",
            self._node,
            len(devices.devices),
            settings.pod_resources_socket or "off",
            settings.device_plugin_dir if settings.device_plugin else "off",
        )

    def _serve_plugin(
        self,
        document: TopologyDocument,
        devices: GpuDevices,
        keeper: TruthKeeper,
        recorder: EventRecorder,
        stop: threading.Event,
    ) -> None:
        topology = prepare_topology(document)
        cache = TopologyCache()
        plugin = GpuDevicePlugin(
            devices,
            claims=lambda: claims_of(self.pods.pods(), keeper.view),
            admitting=keeper.admitting,
            refresh_pods=self.pods.refresh,
            fallback=lambda ask: best_available(ask, topology, cache),
            outcomes=PluginOutcomes(self.metrics, recorder, self.pods.pods, keeper.poke),
            stop=stop,
        )
        self.server = PluginServer(plugin, Path(self._settings.device_plugin_dir))
        server = self.server
        _thread("device-plugin", lambda: server.run(stop, ready=self.pods.synced.is_set))


def _thread(name: str, target: Callable[[], None]) -> None:
    threading.Thread(target=target, name=name, daemon=True).start()
