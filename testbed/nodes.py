"""Simulated GPU nodes for the local test bed.

Registers Node objects that look like real GPU nodes to kube-scheduler: allocatable cpu, memory, pods
and ``nvidia.com/gpu``, a ``Ready`` condition, zone and rack labels, no not-ready taint, and the GPU
topology document as the ``phalanx.io/gpu-topology`` annotation. The label ``phalanx.io/simulated=true``
tells the simulated kubelet (``testbed.kubelet``) which nodes are its own: it keeps them alive.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from urllib.parse import quote

from kubeio.errors import ConflictError
from kubeio.http import JsonObject, KubeHttp, load_api_client
from scheduling.model import GPU_RESOURCE, TOPOLOGY_ANNOTATION
from scheduling.topology import parse_topo_matrix
from testbed.device_manager import DEVICE_MANAGER_ANNOTATION
from testbed.heartbeat import KUBELET_ANNOTATION, NOT_READY, SIMULATED_LABEL, STOPPED, ready_condition

ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "phalanx.io/rack"


@dataclass(frozen=True, slots=True)
class SimNodeSpec:
    """One simulated node.

    Attributes:
        name: the node's name.
        gpus: ``nvidia.com/gpu`` allocatable.
        cpu: cores allocatable.
        memory: memory allocatable, as a quantity string.
        labels: extra labels (zone, rack, ...).
        topology: the topology document JSON for the annotation, or ``None``.
        device_manager: the control socket of the node's kubelet device manager (``hack/devicemanager``),
            or ``None`` for a node whose pods simply run; with one, the node reports no GPUs until a
            device plugin registers, as a real kubelet does.
    """

    name: str
    gpus: int = 8
    cpu: int = 64
    memory: str = "512Gi"
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    topology: str | None = None
    device_manager: str | None = None


def fleet(
    count: int,
    *,
    prefix: str = "gpu-node",
    gpus: int = 8,
    zones: int = 1,
    racks_per_zone: int = 1,
    topology: str | None = None,
) -> list[SimNodeSpec]:
    """``count`` nodes named ``prefix-1..count``, spread in order over zones and racks.

    >>> [(n.name, n.labels[RACK_LABEL]) for n in fleet(3, racks_per_zone=2)]
    [('gpu-node-1', 'rack-1'), ('gpu-node-2', 'rack-1'), ('gpu-node-3', 'rack-2')]
    """
    racks = max(1, zones * racks_per_zone)
    per_rack = -(-count // racks)
    specs = []
    for i in range(count):
        rack = i // per_rack
        zone = rack // max(1, racks_per_zone)
        labels = {ZONE_LABEL: f"zone-{chr(ord('a') + zone)}", RACK_LABEL: f"rack-{rack + 1}"}
        specs.append(SimNodeSpec(f"{prefix}-{i + 1}", gpus=gpus, labels=labels, topology=topology))
    return specs


def node_object(spec: SimNodeSpec) -> JsonObject:
    """The Node to create (status is set separately: creation ignores it)."""
    annotations = {TOPOLOGY_ANNOTATION: spec.topology} if spec.topology else {}
    if spec.device_manager:
        annotations[DEVICE_MANAGER_ANNOTATION] = spec.device_manager
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": spec.name,
            "labels": {
                "kubernetes.io/hostname": spec.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                SIMULATED_LABEL: "true",
                "nvidia.com/gpu.count": str(spec.gpus),
                **spec.labels,
            },
            "annotations": annotations,
        },
        "spec": {},
    }


def status_patch(spec: SimNodeSpec, now: str) -> JsonObject:
    """The status a healthy kubelet reports: capacity, allocatable and ``Ready=True``."""
    resources = {"cpu": str(spec.cpu), "memory": spec.memory, "pods": "110", "ephemeral-storage": "1Ti"}
    if spec.gpus:
        resources[GPU_RESOURCE] = "0" if spec.device_manager else str(spec.gpus)
    return {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [ready_condition("True", now)],
            "nodeInfo": {
                "kubeletVersion": "v1.36.3-phalanx-sim",
                "architecture": "amd64",
                "operatingSystem": "linux",
            },
        }
    }


def register(http: KubeHttp, spec: SimNodeSpec, *, clock: Callable[[], float] = time.time) -> None:
    """Create (or update) the node, clear the creation-time not-ready taint, and report it Ready."""
    path = f"/api/v1/nodes/{quote(spec.name)}"
    obj = node_object(spec)
    try:
        http.request("POST", "/api/v1/nodes", body=obj)
    except ConflictError:
        http.request(
            "PATCH", path, body={"metadata": obj["metadata"]}, content_type="application/merge-patch+json"
        )
    # TaintNodesByCondition adds node.kubernetes.io/not-ready:NoSchedule at creation, which the node
    # lifecycle controller takes off once it sees the node Ready (within its --node-monitor-period);
    # cleared here at once, as that controller would, so a test need not wait for it.
    http.request("PATCH", path, body={"spec": {"taints": None}}, content_type="application/merge-patch+json")
    now = datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    http.request(
        "PATCH", path + "/status", body=status_patch(spec, now), content_type="application/merge-patch+json"
    )


KUBELET_STATES: Mapping[str, str | None] = MappingProxyType(
    {"True": None, "False": NOT_READY, "Unknown": STOPPED}
)
"""Per ``Ready`` status, the simulated kubelet's state (``testbed.heartbeat``) that leads to it."""


def set_ready(http: KubeHttp, name: str, status: str) -> None:
    """Make node ``name`` die (``Unknown``), report not Ready (``False``) or live again (``True``).

    Nothing here writes the condition: this sets how the node's simulated kubelet behaves
    (``testbed.heartbeat``) and the real control plane does the rest. ``Unknown`` stops the kubelet:
    its Lease is no longer renewed, so after ``--node-monitor-grace-period`` the node lifecycle
    controller marks the node ``Ready=Unknown`` and taints it ``node.kubernetes.io/unreachable``, and the
    taint eviction controller evicts its pods after their ``tolerationSeconds``. ``False`` keeps the
    kubelet alive but reporting ``Ready=False`` (the controller taints ``node.kubernetes.io/not-ready``).
    ``True`` starts it again: it posts ``Ready=True`` at once and the controller takes the taints off.
    Either way the kubelet stops acting for the node's pods until it is back.

    Raises:
        ValueError: ``status`` is not one of the three.
    """
    if status not in KUBELET_STATES:
        msg = f"Ready status must be one of {', '.join(KUBELET_STATES)}, not {status!r}"
        raise ValueError(msg)
    http.request(
        "PATCH",
        f"/api/v1/nodes/{quote(name)}",
        body={"metadata": {"annotations": {KUBELET_ANNOTATION: KUBELET_STATES[status]}}},
        content_type="application/merge-patch+json",
    )


def register_all(http: KubeHttp, specs: Sequence[SimNodeSpec]) -> None:
    """Register every node in ``specs``."""
    for spec in specs:
        register(http, spec)


def topology_from_file(path: Path, *, model: str | None = None) -> str:
    """The annotation value for an ``nvidia-smi topo -m`` output file (``--topology``)."""
    return parse_topo_matrix(path.read_text(errors="replace"), gpu_model=model).to_json()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m testbed.nodes``: register simulated GPU nodes in a cluster."""
    parser = argparse.ArgumentParser(description="Register simulated GPU nodes.")
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig path (default: in-cluster)")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--prefix", default="gpu-node")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--zones", type=int, default=1)
    parser.add_argument("--racks-per-zone", type=int, default=1)
    parser.add_argument("--topology", type=Path, default=None, help="an `nvidia-smi topo -m` output file")
    parser.add_argument(
        "--set-ready",
        metavar="NODE=STATUS",
        action="append",
        default=[],
        help="only stop (Unknown), degrade (False) or restart (True) a node's simulated kubelet",
    )
    args = parser.parse_args(argv)
    if args.set_ready:
        http = KubeHttp(load_api_client(args.kubeconfig), user_agent="phalanx-sim-nodes")
        for item in args.set_ready:
            name, _, status = str(item).partition("=")
            set_ready(http, name, status)
            print(f"node {name}: its simulated kubelet makes it Ready={status}")
        return 0
    topology = topology_from_file(args.topology) if args.topology else None
    http = KubeHttp(load_api_client(args.kubeconfig), user_agent="phalanx-sim-nodes")
    specs = fleet(
        args.count,
        prefix=args.prefix,
        gpus=args.gpus,
        zones=args.zones,
        racks_per_zone=args.racks_per_zone,
        topology=topology,
    )
    register_all(http, specs)
    for spec in specs:
        print(f"registered {spec.name} ({spec.gpus} GPUs, {dict(spec.labels)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
