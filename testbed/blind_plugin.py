"""A topology-blind device plugin for ``nvidia.com/gpu``: a node where phalanx's plugin is not serving.

It advertises the node's GPUs by the UUIDs of the node's published topology (the same IDs NVIDIA's
plugin advertises), does not offer ``GetPreferredAllocation``, so the kubelet's device manager takes any
free GPUs, and answers ``Allocate`` with ``NVIDIA_VISIBLE_DEVICES``. End-to-end tests run it in place of
phalanx's plugin to show that a plugin ignoring phalanx's choice is detected and corrected.

Run: ``python -m testbed.blind_plugin --kubeconfig K --node N --dir DEVICE_PLUGIN_DIR``.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from urllib.parse import quote

import grpc

from kubeio.http import KubeHttp, load_api_client
from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi.services import (
    API_VERSION,
    HEALTHY,
    RegistrationClient,
    device_plugin_handler,
    unix_channel,
    unix_target,
)
from scheduling.model import GPU_RESOURCE, TOPOLOGY_ANNOTATION

log = logging.getLogger("blind-plugin")

SOCKET = "blind-gpu.sock"


class BlindPlugin:
    """Serves the GPUs with no preference."""

    def __init__(self, uuids: list[str], stop: threading.Event) -> None:
        self._uuids = uuids
        self._stop = stop

    def get_options(self, request: dp.Empty, context: grpc.ServicerContext) -> dp.DevicePluginOptions:
        """No preferred allocation: the kubelet chooses."""
        return dp.DevicePluginOptions()

    def list_and_watch(
        self, request: dp.Empty, context: grpc.ServicerContext
    ) -> Iterator[dp.ListAndWatchResponse]:
        """Every GPU, healthy, until stopped."""
        yield dp.ListAndWatchResponse(devices=[dp.Device(ID=u, health=HEALTHY) for u in self._uuids])
        while not self._stop.wait(0.5) and context.is_active():
            pass

    def get_preferred_allocation(
        self, request: dp.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> dp.PreferredAllocationResponse:
        """Never called (the option is off); an empty preference if it is."""
        return dp.PreferredAllocationResponse()

    def allocate(self, request: dp.AllocateRequest, context: grpc.ServicerContext) -> dp.AllocateResponse:
        """The allocated UUIDs as ``NVIDIA_VISIBLE_DEVICES``."""
        return dp.AllocateResponse(
            container_responses=[
                dp.ContainerAllocateResponse(envs={"NVIDIA_VISIBLE_DEVICES": ",".join(r.devices_ids)})
                for r in request.container_requests
            ]
        )

    def pre_start_container(
        self, request: dp.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> dp.PreStartContainerResponse:
        """Nothing to do."""
        return dp.PreStartContainerResponse()


def node_uuids(http: KubeHttp, node: str) -> list[str]:
    """The GPU UUIDs of the node's published topology, by index."""
    obj = http.request("GET", f"/api/v1/nodes/{quote(node)}")
    document = json.loads(((obj.get("metadata") or {}).get("annotations") or {})[TOPOLOGY_ANNOTATION])
    return [str(gpu["uuid"]) for gpu in document["gpus"] if gpu.get("uuid")]


def main() -> None:
    """Serve until SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=None)
    parser.add_argument("--node", required=True)
    parser.add_argument("--dir", required=True, type=Path, help="the kubelet's device-plugin directory")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s blind-plugin %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    uuids = node_uuids(KubeHttp(load_api_client(args.kubeconfig)), args.node)
    socket = args.dir / SOCKET
    socket.unlink(missing_ok=True)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers([device_plugin_handler(BlindPlugin(uuids, stop))])
    server.add_insecure_port(unix_target(str(socket)))
    server.start()
    request = dp.RegisterRequest(version=API_VERSION, endpoint=SOCKET, resource_name=GPU_RESOURCE)
    with unix_channel(str(args.dir / "kubelet.sock")) as channel:
        RegistrationClient(channel).register(request, timeout=10)
    log.info("serving %d GPUs of node %s with no preference", len(uuids), args.node)
    stop.wait()
    server.stop(grace=1).wait(5)
    socket.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
