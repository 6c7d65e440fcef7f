"""Serving and registering with a stand-in kubelet, and registering again whenever the kubelet forgets."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi.services import registration_handler, unix_target
from nodeagent.deviceplugin.server import PluginServer
from tests.nodeagent.plugin_fixtures import Served, served, wait_for

__all__ = ["served"]


class FakeKubelet:
    """The kubelet's Registration service on ``<dir>/kubelet.sock``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.requests: list[dp.RegisterRequest] = []
        self._server: grpc.Server | None = None

    def register(self, request: dp.RegisterRequest, context: grpc.ServicerContext) -> dp.Empty:
        self.requests.append(request)
        return dp.Empty()

    def start(self) -> None:
        """(Re)start, as a restarted kubelet does: a new kubelet.sock, the plugins' sockets removed."""
        self.stop()
        for socket in self.directory.glob("*.sock"):
            socket.unlink()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers([registration_handler(self)])
        server.add_insecure_port(unix_target(str(self.directory / "kubelet.sock")))
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None


@pytest.fixture
def kubelet(tmp_path: Path) -> Iterator[FakeKubelet]:
    fake = FakeKubelet(tmp_path)
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def running(served: Served, kubelet: FakeKubelet) -> Iterator[PluginServer]:
    server = PluginServer(served.plugin, kubelet.directory, check_seconds=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=server.run, args=(stop, lambda: True), daemon=True)
    thread.start()
    yield server
    stop.set()
    thread.join(10)


def test_it_registers_its_socket_for_nvidia_gpu_with_preferences(
    running: PluginServer, kubelet: FakeKubelet
) -> None:
    wait_for("a registration", lambda: kubelet.requests)
    (request,) = kubelet.requests
    assert (request.version, request.endpoint, request.resource_name) == (
        "v1beta1",
        "phalanx-gpu.sock",
        "nvidia.com/gpu",
    )
    assert request.options.get_preferred_allocation_available
    assert (kubelet.directory / "phalanx-gpu.sock").exists()


def test_a_restarted_kubelet_gets_a_new_registration_on_a_new_socket(
    running: PluginServer, kubelet: FakeKubelet
) -> None:
    wait_for("a registration", lambda: kubelet.requests)
    kubelet.start()  # deletes every socket, as the kubelet's device manager does at start
    wait_for("a second registration", lambda: len(kubelet.requests) >= 2)
    wait_for("the plugin's socket again", (kubelet.directory / "phalanx-gpu.sock").exists)


def test_it_waits_until_it_can_answer(served: Served, kubelet: FakeKubelet) -> None:
    server = PluginServer(served.plugin, kubelet.directory, check_seconds=0.05)
    stop = threading.Event()
    ready = threading.Event()
    thread = threading.Thread(target=server.run, args=(stop, ready.is_set), daemon=True)
    thread.start()
    try:
        assert not stop.wait(0.5)
        assert kubelet.requests == []
        ready.set()
        wait_for("a registration once ready", lambda: kubelet.requests)
    finally:
        stop.set()
        thread.join(10)


def test_a_kubelet_that_refuses_is_asked_again(served: Served, tmp_path: Path) -> None:
    server = PluginServer(served.plugin, tmp_path, check_seconds=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=server.run, args=(stop, lambda: True), daemon=True)
    thread.start()
    try:
        assert server.needs_registration() == "not registered yet"  # no kubelet.sock yet
        kubelet = FakeKubelet(tmp_path)
        kubelet.start()
        wait_for("a registration once the kubelet is up", lambda: kubelet.requests, timeout=30)
        kubelet.stop()
    finally:
        stop.set()
        thread.join(10)
