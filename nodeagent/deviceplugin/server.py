"""Serving the plugin on its socket and staying registered with the kubelet.

A device plugin serves gRPC on a Unix socket in the kubelet's device-plugin directory and registers that
socket's name with the kubelet's ``Registration`` service (``kubelet.sock`` in the same directory). The
kubelet forgets a plugin in three ways, and each needs a new registration (the plugin's job, not the
kubelet's): a restarted kubelet deletes every socket in the directory and creates a new ``kubelet.sock``;
it ends the plugin's ``ListAndWatch`` streams when it drops the connection; and our own socket file may be
gone. :meth:`PluginServer.run` checks all three every ``check_seconds`` and serves and registers anew.

Registration waits until the plugin can answer correctly (``ready``: the node's pods are listed), so a
restarted agent never answers the kubelet from an empty view of the node.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path

import grpc

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi.services import (
    API_VERSION,
    RegistrationClient,
    device_plugin_handler,
    unix_channel,
    unix_target,
)
from nodeagent.deviceplugin.plugin import GpuDevicePlugin
from scheduling.model import GPU_RESOURCE

KUBELET_SOCKET = "kubelet.sock"
"""The kubelet's registration socket in the device-plugin directory."""

PLUGIN_SOCKET = "phalanx-gpu.sock"
"""This plugin's socket in the same directory."""


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


class PluginServer:
    """Serves one :class:`GpuDevicePlugin` and keeps it registered."""

    def __init__(
        self,
        plugin: GpuDevicePlugin,
        directory: Path,
        *,
        resource: str = GPU_RESOURCE,
        socket_name: str = PLUGIN_SOCKET,
        check_seconds: float = 0.5,
        register_timeout: float = 5.0,
        log: logging.Logger | None = None,
    ) -> None:
        self._plugin = plugin
        self._directory = directory
        self._socket = directory / socket_name
        self._kubelet = directory / KUBELET_SOCKET
        self._resource = resource
        self._check = check_seconds
        self._register_timeout = register_timeout
        self._log = log or logging.getLogger(__name__)
        self._server: grpc.Server | None = None
        self._registered_with: tuple[int, int] | None = None
        self.registrations = 0
        """How many times the plugin registered (a new kubelet, a dropped stream, a lost socket)."""

    @property
    def socket(self) -> Path:
        """The plugin's socket."""
        return self._socket

    def serve(self) -> None:
        """Start serving on a fresh socket (replacing a stale file of an earlier run)."""
        self.stop_serving()
        self._directory.mkdir(parents=True, exist_ok=True)
        self._socket.unlink(missing_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="device-plugin"))
        server.add_generic_rpc_handlers([device_plugin_handler(self._plugin)])
        server.add_insecure_port(unix_target(str(self._socket)))
        server.start()
        self._server = server
        self._log.info("device plugin serving %s on %s", self._resource, self._socket)

    def register(self) -> None:
        """Register with the kubelet.

        Raises:
            grpc.RpcError: the kubelet refused or is not there.
        """
        identity = _identity(self._kubelet)
        request = dp.RegisterRequest(
            version=API_VERSION,
            endpoint=self._socket.name,
            resource_name=self._resource,
            options=dp.DevicePluginOptions(get_preferred_allocation_available=True),
        )
        with unix_channel(str(self._kubelet)) as channel:
            RegistrationClient(channel).register(request, timeout=self._register_timeout)
        self._registered_with = identity
        self._plugin.streams.reset()
        self.registrations += 1
        self._log.info("registered %s with the kubelet (%s)", self._resource, self._kubelet)

    def needs_registration(self) -> str | None:
        """Why the kubelet no longer knows this plugin, or ``None`` while it does."""
        if self._registered_with is None:
            return "not registered yet"
        if not self._socket.exists():
            return f"the plugin's socket {self._socket} is gone"
        if _identity(self._kubelet) != self._registered_with:
            return "the kubelet's registration socket changed (the kubelet restarted)"
        if self._plugin.streams.dropped():
            return "the kubelet ended every ListAndWatch stream"
        return None

    def run(self, stop: threading.Event, ready: Callable[[], bool]) -> None:
        """Serve and stay registered until ``stop``; never raises."""
        backoff = self._check
        while not stop.is_set():
            reason = self.needs_registration() if ready() else None
            if reason is not None:
                try:
                    if reason != "the kubelet ended every ListAndWatch stream" or not self._socket.exists():
                        self.serve()
                    self.register()
                    backoff = self._check
                except (grpc.RpcError, OSError, RuntimeError) as exc:
                    self._registered_with = None
                    self._log.warning(
                        "%s; registering failed: %s; retrying in %.1fs", reason, _brief(exc), backoff
                    )
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
                    continue
            stop.wait(self._check)
        self.stop_serving()

    def stop_serving(self) -> None:
        """Stop the gRPC server and remove the socket."""
        if self._server is not None:
            self._server.stop(grace=1.0).wait(5)
            self._server = None
        if self._socket.exists():
            try:
                os.unlink(self._socket)
            except OSError as exc:
                self._log.warning("could not remove %s: %s", self._socket, exc)


def _brief(exc: BaseException) -> str:
    if isinstance(exc, grpc.RpcError):
        code = exc.code() if hasattr(exc, "code") else None
        details = exc.details() if hasattr(exc, "details") else ""
        return f"{code}: {details}"
    return str(exc)
