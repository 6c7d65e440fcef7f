"""phalanx's device plugin for ``nvidia.com/gpu``: the kubelet takes exactly the GPUs phalanx chose.

The kubelet calls ``GetPreferredAllocation`` for a container without saying which pod it admits; the
answer comes from ``scheduling.devices.claims``: the one pod on this node that can be in admission, or,
when several can, the one the kubelet's own PodResources lists as being admitted. ``Allocate`` answers
what NVIDIA's plugin answers with its default ``envvar`` device-list strategy: the GPUs' UUIDs in
``NVIDIA_VISIBLE_DEVICES``, which the NVIDIA container runtime turns into the container's devices (CDI
names are left out: with the envvar strategy NVIDIA's plugin sends none either). Every answer is
recorded (:class:`Outcomes`: a metric, and an event when the plugin had to guess), and an ``Allocate``
of other GPUs than preferred is reported at once; the truth keeper then reads what each container got.

The handlers never raise into gRPC except to refuse a malformed request with ``INVALID_ARGUMENT`` and a
reason (an ID that is no GPU of this node, a negative size).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Protocol

import grpc

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi.services import HEALTHY, UNHEALTHY
from nodeagent.gpu_devices import GpuDevices
from scheduling.devices.claims import AllocationAsk, Basis, DeviceClaim, Preference, prefer

VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
"""The variable NVIDIA's container runtime reads the container's GPUs from (UUIDs, comma-separated)."""


class Outcomes(Protocol):
    """Where the plugin reports what it did (metrics, events, the truth keeper's wake-up)."""

    def preferred(self, preference: Preference) -> None:
        """A ``GetPreferredAllocation`` answer."""

    def allocated(self, gpus: tuple[int, ...], preference: Preference | None) -> None:
        """An ``Allocate`` of ``gpus``; ``preference`` is the answer given just before, if any."""


class StreamWatch:
    """Counts the kubelet's open ``ListAndWatch`` streams and notices when the kubelet ended them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._ended_by_kubelet = False

    def opened(self) -> None:
        """A stream began."""
        with self._lock:
            self._open += 1
            self._ended_by_kubelet = False

    def closed(self, *, by_kubelet: bool) -> None:
        """A stream ended; ``by_kubelet`` when the plugin did not end it itself."""
        with self._lock:
            self._open -= 1
            if by_kubelet and self._open == 0:
                self._ended_by_kubelet = True

    def dropped(self) -> bool:
        """Whether the kubelet ended every stream (it forgot the plugin: register again)."""
        with self._lock:
            return self._ended_by_kubelet and self._open == 0

    def reset(self) -> None:
        """Forget a drop (after registering again)."""
        with self._lock:
            self._ended_by_kubelet = False


class GpuDevicePlugin:
    """The ``v1beta1.DevicePlugin`` servicer (:class:`kubeio.kubeletapi.services.DevicePluginServicer`)."""

    def __init__(
        self,
        devices: GpuDevices,
        *,
        claims: Callable[[], list[DeviceClaim]],
        admitting: Callable[[], frozenset[str] | None],
        refresh_pods: Callable[[], None],
        fallback: Callable[[AllocationAsk], tuple[int, ...]],
        outcomes: Outcomes,
        stop: threading.Event,
        log: logging.Logger | None = None,
    ) -> None:
        self._devices = devices
        self._claims = claims
        self._admitting = admitting
        self._refresh_pods = refresh_pods
        self._fallback = fallback
        self._outcomes = outcomes
        self._stop = stop
        self._log = log or logging.getLogger(__name__)
        self._last: Preference | None = None
        self._lock = threading.Lock()
        self.streams = StreamWatch()

    def get_options(self, request: dp.Empty, context: grpc.ServicerContext) -> dp.DevicePluginOptions:
        """Ask for ``GetPreferredAllocation``; no ``PreStartContainer`` is needed."""
        return dp.DevicePluginOptions(get_preferred_allocation_available=True)

    def list_and_watch(
        self, request: dp.Empty, context: grpc.ServicerContext
    ) -> Iterator[dp.ListAndWatchResponse]:
        """The GPUs now, and again after every health change, until the kubelet or the agent ends it."""
        self.streams.opened()
        try:
            seen = -1
            while not self._stop.is_set() and context.is_active():
                version = self._devices.version
                if version != seen:
                    seen = version
                    yield self.device_list()
                self._devices.wait_change(seen, timeout=0.5)
        finally:
            self.streams.closed(by_kubelet=not self._stop.is_set())

    def device_list(self) -> dp.ListAndWatchResponse:
        """Every GPU with its UUID, health and NUMA node."""
        devices = []
        for gpu in self._devices.devices:
            topology = (
                dp.TopologyInfo(nodes=[dp.NUMANode(ID=gpu.numa_node)]) if gpu.numa_node is not None else None
            )
            health = HEALTHY if self._devices.healthy(gpu.index) else UNHEALTHY
            devices.append(dp.Device(ID=gpu.uuid, health=health, topology=topology))
        return dp.ListAndWatchResponse(devices=devices)

    def get_preferred_allocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        """For each container: the set of the pod in admission (see the module docstring)."""
        responses = []
        for each in request.container_requests:
            ask = self._ask(each, context)
            preference = self._prefer(ask)
            with self._lock:
                self._last = preference
            self._outcomes.preferred(preference)
            log = self._log.warning if preference.basis is Basis.GUESSED else self._log.info
            log("preferred %s", preference.describe())
            ids = [self._devices.id_of(i) for i in preference.gpus]
            responses.append(dp.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return dp.PreferredAllocationResponse(container_responses=responses)

    def _ask(
        self, request: dp.ContainerPreferredAllocationRequest, context: grpc.ServicerContext
    ) -> AllocationAsk:
        available, _ = self._devices.to_indices(request.available_deviceIDs)
        must, unknown = self._devices.to_indices(request.must_include_deviceIDs)
        if unknown:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"must_include names devices that are no GPU of this node: {list(unknown)}",
            )
        if request.allocation_size < 0:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"allocation_size must not be negative, got {request.allocation_size}",
            )
        return AllocationAsk(frozenset(available), frozenset(must), request.allocation_size)

    def _prefer(self, ask: AllocationAsk) -> Preference:
        if ask.size == 0:
            return Preference((), Basis.UNCLAIMED, None, ())
        preference = prefer(ask, self._claims(), admitting=None, fallback=self._fallback)
        if preference.basis is Basis.UNCLAIMED and not preference.contenders:
            # The kubelet may have seen the pod before this agent's watch did: read the API once more.
            self._refresh()
            preference = prefer(ask, self._claims(), admitting=None, fallback=self._fallback)
        if preference.basis is Basis.GUESSED:
            preference = prefer(ask, self._claims(), admitting=self._admitting(), fallback=self._fallback)
        if preference.basis is Basis.GUESSED:
            # The kubelet named none of the contenders: this agent may not know the pod (or its
            # containers) yet. Read the API and the kubelet once more before guessing.
            self._refresh()
            preference = prefer(ask, self._claims(), admitting=self._admitting(), fallback=self._fallback)
        return preference

    def _refresh(self) -> None:
        try:
            self._refresh_pods()
        except Exception as exc:  # a failed read must not fail the kubelet's admission
            self._log.warning("could not list this node's pods again: %s", exc)

    def allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        """The UUIDs of the GPUs the kubelet allocated, as ``NVIDIA_VISIBLE_DEVICES``."""
        responses = []
        for each in request.container_requests:
            gpus, unknown = self._devices.to_indices(each.devices_ids)
            if unknown or not each.devices_ids:
                what = f"unknown devices {list(unknown)}" if unknown else "no devices"
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"cannot allocate {what} of nvidia.com/gpu")
            with self._lock:
                preference, self._last = self._last, None
            self._outcomes.allocated(gpus, preference)
            uuids = ",".join(self._devices.id_of(i) for i in gpus)
            responses.append(dp.ContainerAllocateResponse(envs={VISIBLE_DEVICES_ENV: uuids}))
        return dp.AllocateResponse(container_responses=responses)

    def pre_start_container(
        self, request: dp.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> dp.PreStartContainerResponse:
        """Nothing to prepare (the kubelet does not call it: ``pre_start_required`` is false)."""
        return dp.PreStartContainerResponse()
