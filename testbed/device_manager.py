"""The simulated kubelet's device manager: the kubelet's own, run by ``hack/devicemanager`` for each node.

A simulated node whose annotation ``phalanx.io/sim-device-manager`` names a control socket has a real
kubelet device manager (Kubernetes v1.36.3's ``pkg/kubelet/cm/devicemanager``, built by
``hack/devicemanager``) behind it, with device plugins registered on its socket directory as on a real
node. For such a node the simulated kubelet does what the kubelet does at pod admission, one pod at a
time per node in the order it sees them: it asks the device manager to allocate every container
(:meth:`DeviceNodes.admit`), then reports the pod Running with each container's devices in
``status.containerStatuses[].allocatedResourcesStatus`` (as the kubelet does with ResourceHealthStatus,
on by default in v1.36), or rejects it as the kubelet does: ``Failed``, reason
``UnexpectedAdmissionError``. A pod that finished or is gone is removed, which frees its devices. Node
capacity and allocatable of every device resource follow the device manager (``GetCapacity``), so a
GPU that went unhealthy, or a plugin that is not registered, shows on the Node as on a real one.

Each node has a worker thread and a queue of its own, so a slow plugin on one node delays no other.
"""

from __future__ import annotations

import http.client
import json
import logging
import queue
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeio.http import JsonObject

log = logging.getLogger(__name__)

DEVICE_MANAGER_ANNOTATION = "phalanx.io/sim-device-manager"
"""Node annotation: the control socket of the node's device manager (``hack/devicemanager``)."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


@dataclass(frozen=True, slots=True)
class Admission:
    """The device manager's answer for one pod.

    Attributes:
        admitted: every container got its devices.
        reason: why not (the kubelet's admission reason), when not.
        message: the kubelet's message, when not.
        devices: container name -> resource -> device IDs.
        statuses: the containers' statuses with ``allocatedResourcesStatus``.
    """

    admitted: bool
    reason: str = ""
    message: str = ""
    devices: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=dict)
    statuses: tuple[JsonObject, ...] = ()


class DeviceManagerClient:
    """Speaks to one ``hack/devicemanager`` over its control socket."""

    def __init__(self, path: str, *, timeout: float = 120.0) -> None:
        self.path = path
        self._timeout = timeout

    def _call(self, method: str, route: str, body: object = None) -> Any:
        connection = _UnixConnection(self.path, self._timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            connection.request(method, route, body=payload, headers={"Content-Type": "application/json"})
            reply = connection.getresponse()
            data = reply.read()
            if reply.status != 200:
                msg = f"device manager {route}: HTTP {reply.status}: {data.decode(errors='replace')}"
                raise OSError(msg)
            return json.loads(data)
        finally:
            connection.close()

    def admit(self, pod: JsonObject) -> Admission:
        """Allocate every container of ``pod``, as the kubelet's admission does; raises ``OSError``."""
        reply = self._call("POST", "/admit", pod)
        devices = {
            c["name"]: {resource: tuple(ids) for resource, ids in (c.get("devices") or {}).items()}
            for c in reply.get("containers") or []
        }
        return Admission(
            bool(reply.get("admitted")),
            str(reply.get("reason", "")),
            str(reply.get("message", "")),
            devices,
            tuple(reply.get("containerStatuses") or ()),
        )

    def remove(self, uid: str) -> None:
        """The pod is no longer active; raises ``OSError``."""
        self._call("POST", "/remove", {"uid": uid})

    def capacity(self) -> tuple[dict[str, str], dict[str, str]]:
        """Device resources' capacity and allocatable (``GetCapacity``); raises ``OSError``."""
        reply = self._call("GET", "/capacity")
        return dict(reply.get("capacity") or {}), dict(reply.get("allocatable") or {})


def with_devices(patch: JsonObject, statuses: tuple[JsonObject, ...]) -> JsonObject:
    """A Running status patch with each container's ``allocatedResourcesStatus`` from the device manager."""
    allocated = {
        s.get("name"): s.get("allocatedResourcesStatus")
        for s in statuses
        if s.get("allocatedResourcesStatus")
    }
    for status in patch["status"].get("containerStatuses") or []:
        if status.get("name") in allocated:
            status["allocatedResourcesStatus"] = allocated[status["name"]]
    return patch


def rejected_status(reason: str, message: str) -> JsonObject:
    """The status the kubelet writes for a pod its admission rejected."""
    return {"status": {"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}"}}


class DeviceNodes:
    """The device-managed simulated nodes: one admission worker and capacity sync per node."""

    def __init__(
        self,
        *,
        running: Callable[[JsonObject, Admission], None],
        rejected: Callable[[JsonObject, Admission], None],
        node_resources: Callable[[str, dict[str, str], dict[str, str]], None],
        stop: threading.Event,
    ) -> None:
        self._running = running
        self._rejected = rejected
        self._node_resources = node_resources
        self._stop = stop
        self._lock = threading.Lock()
        self._nodes: dict[str, tuple[DeviceManagerClient, queue.Queue[tuple[str, JsonObject]]]] = {}

    def node(self, name: str, annotations: Mapping[str, str]) -> None:
        """A node seen (again): start its worker when it names a device manager not known yet."""
        path = annotations.get(DEVICE_MANAGER_ANNOTATION)
        if not path:
            return
        with self._lock:
            if name in self._nodes and self._nodes[name][0].path == path:
                return
            client = DeviceManagerClient(path)
            work: queue.Queue[tuple[str, JsonObject]] = queue.Queue()
            self._nodes[name] = (client, work)
        threading.Thread(
            target=self._work, args=(name, client, work), name=f"devices-{name}", daemon=True
        ).start()
        threading.Thread(target=self._sync, args=(name, client), name=f"capacity-{name}", daemon=True).start()

    def manages(self, name: str | None) -> bool:
        """Whether pods on node ``name`` go through a device manager."""
        with self._lock:
            return name in self._nodes

    def admit(self, node: str, pod: JsonObject) -> None:
        """Queue ``pod`` for admission on ``node`` (in the order of the calls)."""
        self._queue(node, "admit", pod)

    def remove(self, node: str, pod: JsonObject) -> None:
        """Queue the end of ``pod`` on ``node``: its devices are freed."""
        self._queue(node, "remove", pod)

    def _queue(self, node: str, op: str, pod: JsonObject) -> None:
        with self._lock:
            entry = self._nodes.get(node)
        if entry is not None:
            entry[1].put((op, pod))

    def _work(
        self, name: str, client: DeviceManagerClient, work: queue.Queue[tuple[str, JsonObject]]
    ) -> None:
        while not self._stop.is_set():
            try:
                op, pod = work.get(timeout=0.5)
            except queue.Empty:
                continue
            meta = pod.get("metadata") or {}
            try:
                if op == "remove":
                    client.remove(str(meta.get("uid", "")))
                    continue
                admission = client.admit(pod)
            except OSError as exc:
                log.warning(
                    "node %s: device manager failed for pod %s/%s: %s",
                    name,
                    meta.get("namespace"),
                    meta.get("name"),
                    exc,
                )
                continue
            if admission.admitted:
                self._running(pod, admission)
            else:
                log.info(
                    "node %s rejected pod %s/%s: %s",
                    name,
                    meta.get("namespace"),
                    meta.get("name"),
                    admission.message,
                )
                self._rejected(pod, admission)

    def _sync(self, name: str, client: DeviceManagerClient) -> None:
        last: tuple[dict[str, str], dict[str, str]] | None = None
        while not self._stop.wait(0.5):
            try:
                now = client.capacity()
            except OSError:
                continue
            if now != last:
                self._node_resources(name, *now)
                last = now
