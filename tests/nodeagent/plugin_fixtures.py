"""A device plugin served over a real gRPC Unix socket, with fakes for its pods, kubelet and outcomes."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from kubeio.kubeletapi.services import DevicePluginClient, device_plugin_handler, unix_channel, unix_target
from nodeagent.deviceplugin.plugin import GpuDevicePlugin
from nodeagent.gpu_devices import GpuDevice, GpuDevices
from scheduling.devices.claims import AllocationAsk, DeviceClaim, Preference


def wait_for(what: str, probe: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll ``probe`` until it is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.02)
    msg = f"timed out after {timeout}s waiting for {what}"
    raise AssertionError(msg)


def uuid(index: int) -> str:
    return f"GPU-{index:08x}-0000-4000-8000-000000000000"


class RecordingOutcomes:
    """What the plugin reported."""

    def __init__(self) -> None:
        self.preferences: list[Preference] = []
        self.allocations: list[tuple[tuple[int, ...], Preference | None]] = []

    def preferred(self, preference: Preference) -> None:
        self.preferences.append(preference)

    def allocated(self, gpus: tuple[int, ...], preference: Preference | None) -> None:
        self.allocations.append((gpus, preference))


@dataclass
class World:
    """The plugin's surroundings, set by each test."""

    claims: list[DeviceClaim] = field(default_factory=list)
    admitting: frozenset[str] | None = None
    asked_kubelet: int = 0
    refreshed: int = 0
    later_claims: list[DeviceClaim] = field(default_factory=list)

    def claims_now(self) -> list[DeviceClaim]:
        return list(self.claims)

    def kubelet(self) -> frozenset[str] | None:
        self.asked_kubelet += 1
        return self.admitting

    def refresh(self) -> None:
        self.refreshed += 1
        self.claims.extend(self.later_claims)
        self.later_claims.clear()


@dataclass
class Served:
    plugin: GpuDevicePlugin
    client: DevicePluginClient
    channel: grpc.Channel
    devices: GpuDevices
    world: World
    outcomes: RecordingOutcomes
    stop: threading.Event


def lowest(ask: AllocationAsk) -> tuple[int, ...]:
    return tuple(sorted(ask.available)[: ask.size])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    devices = GpuDevices([GpuDevice(i, uuid(i), numa_node=i // 4) for i in range(8)])
    world = World()
    outcomes = RecordingOutcomes()
    stop = threading.Event()
    plugin = GpuDevicePlugin(
        devices,
        claims=world.claims_now,
        admitting=world.kubelet,
        refresh_pods=world.refresh,
        fallback=lowest,
        outcomes=outcomes,
        stop=stop,
    )
    socket = tmp_path / "plugin.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([device_plugin_handler(plugin)])
    server.add_insecure_port(unix_target(str(socket)))
    server.start()
    channel = unix_channel(str(socket))
    try:
        yield Served(plugin, DevicePluginClient(channel), channel, devices, world, outcomes, stop)
    finally:
        stop.set()
        channel.close()
        server.stop(grace=None).wait(5)
