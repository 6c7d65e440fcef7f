"""What the kubelet says each pod holds: its PodResources ``List``, in GPU indices.

The kubelet reports, per active pod and per container, the device IDs its device manager gave (one
entry per device, Kubernetes v1.36 ``pkg/kubelet/cm``); this module adds them up per pod for
``nvidia.com/gpu`` and translates them into indices (:class:`~nodeagent.gpu_devices.GpuDevices`). It
also tells which pods the kubelet is admitting right now: the kubelet adds a pod to its pod manager just
before admitting it, so the pod in admission is listed while its GPU containers hold no devices yet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubeio.kubeletapi import podresources_v1_pb2 as pr
from kubeio.kubeletapi.services import PodResourcesClient, unix_channel
from kubeio.node_pods import NodePod
from nodeagent.gpu_devices import GpuDevices
from scheduling.devices.truth import PodDevices
from scheduling.model import GPU_RESOURCE


@dataclass(frozen=True, slots=True)
class KubeletView:
    """One read of the kubelet.

    Attributes:
        pods: every listed pod with the GPUs it holds, by ``namespace/name``.
        admitting: the listed pods whose GPU containers hold no devices yet (the one in admission).
    """

    pods: Mapping[str, PodDevices]
    admitting: frozenset[str]

    @property
    def allocated(self) -> frozenset[str]:
        """The listed pods done with device allocation."""
        return frozenset(key for key, report in self.pods.items() if not report.pending)


def view_of(
    reply: pr.ListPodResourcesResponse, devices: GpuDevices, pods: Mapping[str, NodePod]
) -> KubeletView:
    """Turn a ``List`` reply into GPU indices per pod, knowing each pod's GPU containers from the API."""
    reports: dict[str, PodDevices] = {}
    admitting: set[str] = set()
    for resources in reply.pod_resources:
        key = f"{resources.namespace}/{resources.name}"
        ids: list[str] = []
        holding: set[str] = set()
        for container in resources.containers:
            mine = [i for d in container.devices if d.resource_name == GPU_RESOURCE for i in d.device_ids]
            if mine:
                holding.add(container.name)
                ids.extend(mine)
        gpus, unknown = devices.to_indices(ids)
        pod = pods.get(key)
        pending = pod is not None and any(name not in holding for name in pod.listed)
        if pending:
            admitting.add(key)
        reports[key] = PodDevices(key, gpus, pending, unknown)
    return KubeletView(reports, frozenset(admitting))


class KubeletReader:
    """Reads the kubelet's PodResources socket."""

    def __init__(self, socket: str, devices: GpuDevices, *, timeout: float = 5.0) -> None:
        self._socket = socket
        self._devices = devices
        self._timeout = timeout

    def read(self, pods: Mapping[str, NodePod]) -> KubeletView:
        """One ``List``.

        Raises:
            grpc.RpcError: the kubelet could not be reached or failed.
        """
        with unix_channel(self._socket) as channel:
            reply = PodResourcesClient(channel).list(timeout=self._timeout)
        return view_of(reply, self._devices, pods)
