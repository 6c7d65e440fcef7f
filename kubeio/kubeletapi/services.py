"""The kubelet's gRPC services as typed Python: handlers for what phalanx serves, clients for what it calls.

The message classes are generated from the ``.proto`` files beside this module (``hack/protos``); the
service glue is written here instead of generated, so every method is typed (the generated
``*_pb2_grpc.py`` is not) and a malformed request is refused by the deserializer before any code of
ours sees it: gRPC answers it with a status, never a crash.

Services and methods (the wire names are ``/<package>.<Service>/<Method>``):

* ``v1beta1.Registration/Register``: served by the kubelet on ``kubelet.sock`` of the device-plugin
  directory; the plugin calls it (:class:`RegistrationClient`).
* ``v1beta1.DevicePlugin/*``: served by a plugin on its own socket (:func:`device_plugin_handler`);
  the kubelet calls it (and tests, through :class:`DevicePluginClient`).
* ``v1.PodResourcesLister/*``: served by the kubelet on ``pod-resources/kubelet.sock``; the node agent
  reads ``List`` (:class:`PodResourcesClient`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import grpc

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi import podresources_v1_pb2 as pr

API_VERSION = "v1beta1"
"""The device plugin API version the kubelet accepts in ``Register``."""

HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"

REGISTRATION = "v1beta1.Registration"
DEVICE_PLUGIN = "v1beta1.DevicePlugin"
POD_RESOURCES = "v1.PodResourcesLister"


def unix_target(path: str) -> str:
    """The gRPC target of a Unix socket path."""
    return f"unix://{path}"


def unix_channel(path: str) -> grpc.Channel:
    """An insecure channel to a Unix socket (the kubelet's sockets are local files, no TLS)."""
    return grpc.insecure_channel(unix_target(path))


class DevicePluginServicer(Protocol):
    """What a device plugin implements (the kubelet calls these)."""

    def get_options(self, request: dp.Empty, context: grpc.ServicerContext) -> dp.DevicePluginOptions:
        """``GetDevicePluginOptions``."""
        ...

    def list_and_watch(
        self, request: dp.Empty, context: grpc.ServicerContext
    ) -> Iterator[dp.ListAndWatchResponse]:
        """``ListAndWatch``: the device list now, then again at every change, until the call ends."""
        ...

    def get_preferred_allocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        """``GetPreferredAllocation``."""
        ...

    def allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        """``Allocate``."""
        ...

    def pre_start_container(
        self, request: dp.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> dp.PreStartContainerResponse:
        """``PreStartContainer``."""
        ...


def device_plugin_handler(servicer: DevicePluginServicer) -> grpc.GenericRpcHandler:
    """The ``v1beta1.DevicePlugin`` service of ``servicer``, to add to a ``grpc.Server``."""
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "GetDevicePluginOptions": grpc.unary_unary_rpc_method_handler(
            servicer.get_options,
            request_deserializer=dp.Empty.FromString,
            response_serializer=dp.DevicePluginOptions.SerializeToString,
        ),
        "ListAndWatch": grpc.unary_stream_rpc_method_handler(
            servicer.list_and_watch,
            request_deserializer=dp.Empty.FromString,
            response_serializer=dp.ListAndWatchResponse.SerializeToString,
        ),
        "GetPreferredAllocation": grpc.unary_unary_rpc_method_handler(
            servicer.get_preferred_allocation,
            request_deserializer=dp.PreferredAllocationRequest.FromString,
            response_serializer=dp.PreferredAllocationResponse.SerializeToString,
        ),
        "Allocate": grpc.unary_unary_rpc_method_handler(
            servicer.allocate,
            request_deserializer=dp.AllocateRequest.FromString,
            response_serializer=dp.AllocateResponse.SerializeToString,
        ),
        "PreStartContainer": grpc.unary_unary_rpc_method_handler(
            servicer.pre_start_container,
            request_deserializer=dp.PreStartContainerRequest.FromString,
            response_serializer=dp.PreStartContainerResponse.SerializeToString,
        ),
    }
    return grpc.method_handlers_generic_handler(DEVICE_PLUGIN, handlers)


class RegistrationServicer(Protocol):
    """What the kubelet's registration service does (a test stands in for it)."""

    def register(self, request: dp.RegisterRequest, context: grpc.ServicerContext) -> dp.Empty:
        """``Register``."""
        ...


def registration_handler(servicer: RegistrationServicer) -> grpc.GenericRpcHandler:
    """The ``v1beta1.Registration`` service of ``servicer``."""
    handler: grpc.RpcMethodHandler[Any, Any] = grpc.unary_unary_rpc_method_handler(
        servicer.register,
        request_deserializer=dp.RegisterRequest.FromString,
        response_serializer=dp.Empty.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(REGISTRATION, {"Register": handler})


class PodResourcesServicer(Protocol):
    """What the kubelet's PodResources service does (a test stands in for it)."""

    def list(
        self, request: pr.ListPodResourcesRequest, context: grpc.ServicerContext
    ) -> pr.ListPodResourcesResponse:
        """``List``."""
        ...


def pod_resources_handler(servicer: PodResourcesServicer) -> grpc.GenericRpcHandler:
    """The ``v1.PodResourcesLister`` service's ``List`` of ``servicer``."""
    handler: grpc.RpcMethodHandler[Any, Any] = grpc.unary_unary_rpc_method_handler(
        servicer.list,
        request_deserializer=pr.ListPodResourcesRequest.FromString,
        response_serializer=pr.ListPodResourcesResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(POD_RESOURCES, {"List": handler})


class RegistrationClient:
    """Calls the kubelet's ``Register``."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._register = channel.unary_unary(
            f"/{REGISTRATION}/Register",
            request_serializer=dp.RegisterRequest.SerializeToString,
            response_deserializer=dp.Empty.FromString,
        )

    def register(self, request: dp.RegisterRequest, *, timeout: float) -> None:
        """Register a plugin; raises ``grpc.RpcError`` when the kubelet refuses or cannot be reached."""
        self._register(request, timeout=timeout)


class PodResourcesClient:
    """Calls the kubelet's PodResources ``List``."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._list = channel.unary_unary(
            f"/{POD_RESOURCES}/List",
            request_serializer=pr.ListPodResourcesRequest.SerializeToString,
            response_deserializer=pr.ListPodResourcesResponse.FromString,
        )

    def list(self, *, timeout: float) -> pr.ListPodResourcesResponse:
        """Every active pod with the devices of each container; raises ``grpc.RpcError``."""
        return self._list(pr.ListPodResourcesRequest(), timeout=timeout)


class DevicePluginClient:
    """Calls a device plugin as the kubelet does (tests and the fuzz test use it)."""

    def __init__(self, channel: grpc.Channel) -> None:
        base = f"/{DEVICE_PLUGIN}"
        self._options = channel.unary_unary(
            f"{base}/GetDevicePluginOptions",
            request_serializer=dp.Empty.SerializeToString,
            response_deserializer=dp.DevicePluginOptions.FromString,
        )
        self._watch = channel.unary_stream(
            f"{base}/ListAndWatch",
            request_serializer=dp.Empty.SerializeToString,
            response_deserializer=dp.ListAndWatchResponse.FromString,
        )
        self._prefer = channel.unary_unary(
            f"{base}/GetPreferredAllocation",
            request_serializer=dp.PreferredAllocationRequest.SerializeToString,
            response_deserializer=dp.PreferredAllocationResponse.FromString,
        )
        self._allocate = channel.unary_unary(
            f"{base}/Allocate",
            request_serializer=dp.AllocateRequest.SerializeToString,
            response_deserializer=dp.AllocateResponse.FromString,
        )

    def get_options(self, *, timeout: float) -> dp.DevicePluginOptions:
        """``GetDevicePluginOptions``."""
        return self._options(dp.Empty(), timeout=timeout)

    def list_and_watch(self, *, timeout: float | None = None) -> Iterator[dp.ListAndWatchResponse]:
        """``ListAndWatch``: an iterator of device lists (cancel it to end the call)."""
        return self._watch(dp.Empty(), timeout=timeout)

    def get_preferred_allocation(
        self, request: dp.PreferredAllocationRequest, *, timeout: float
    ) -> dp.PreferredAllocationResponse:
        """``GetPreferredAllocation``."""
        return self._prefer(request, timeout=timeout)

    def allocate(self, request: dp.AllocateRequest, *, timeout: float) -> dp.AllocateResponse:
        """``Allocate``."""
        return self._allocate(request, timeout=timeout)
