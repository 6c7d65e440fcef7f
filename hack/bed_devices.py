"""GPU nodes with a real kubelet device manager on the test bed: the node side, end to end.

For each node it starts ``hack/devicemanager`` (the kubelet v1.36.3 device manager, sockets under
``<state>/nodes/<node>/``), registers the Node pointing the simulated kubelet at it, and starts the node
agent as in production (``python -m nodeagent``, identity and RBAC of ``manifests/node-agent.yaml``) on a
fake NVML built from a ``topo -m`` file, with phalanx's device plugin (``plugin=True``) or only reading
the truth while a topology-blind plugin (``testbed.blind_plugin``) allocates.

Processes are named ``devicemanager-<node>``, ``node-agent-<node>`` and ``blind-plugin-<node>`` in the
test bed, so ``Testbed.kill``/``pid``/``is_running`` reach them.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from localbed import REPO, Testbed, free_port
from localcluster import DEVICE_MANAGER, build_module

from scheduling.model import GPU_RESOURCE, TOPOLOGY_ANNOTATION
from testbed.nodes import SimNodeSpec, register

RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


class DeviceBed:
    """Device-managed simulated GPU nodes on a running :class:`Testbed`."""

    def __init__(self, bed: Testbed, topology: Path) -> None:
        self.bed = bed
        self.topology = topology
        self.metrics_ports: dict[str, int] = {}
        self._rbac = False

    def root(self, node: str) -> Path:
        """The node's kubelet directory (``device-plugins/``, ``pod-resources/``, ``control.sock``)."""
        return self.bed.state_dir / "nodes" / node

    def add(
        self,
        specs: Sequence[SimNodeSpec],
        *,
        plugin: bool = True,
        taint: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        """Start each node's device manager and agent; wait until its GPUs are allocatable.

        With ``taint``, each node is tainted ``<taint>=true:NoSchedule`` so only pods that tolerate it
        land there (a test keeps these nodes to itself on a shared test bed).
        """
        self._apply_rbac()
        bins = build_module(DEVICE_MANAGER, log=self.bed.log)
        for spec in specs:
            root = self.root(spec.name)
            (root / "device-plugins").mkdir(parents=True, exist_ok=True)
            control = root / "control.sock"
            control.unlink(missing_ok=True)
            self.bed._spawn(f"devicemanager-{spec.name}", [str(bins / "devicemanager"), f"--root={root}"])
            _wait(f"{control}", control.exists, timeout)
            register(self.bed.http, _with_manager(spec, str(control)))
            if taint:
                body = {"spec": {"taints": [{"key": taint, "value": "true", "effect": "NoSchedule"}]}}
                self.bed.http.request(
                    "PATCH",
                    f"/api/v1/nodes/{spec.name}",
                    body=body,
                    content_type="application/merge-patch+json",
                )
            self.start_agent(spec.name, plugin=plugin)
        for spec in specs:
            _wait(f"{spec.name} to offer its GPUs", lambda s=spec: self._ready(s), timeout)

    def _ready(self, spec: SimNodeSpec) -> bool:
        node = self.bed.http.request("GET", f"/api/v1/nodes/{spec.name}")
        annotations = node["metadata"].get("annotations") or {}
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        return TOPOLOGY_ANNOTATION in annotations and allocatable.get(GPU_RESOURCE) == str(spec.gpus)

    def start_agent(self, node: str, *, plugin: bool = True) -> None:
        """Start the node's agent (again), with or without phalanx's device plugin."""
        root = self.root(node)
        port = self.metrics_ports.setdefault(node, free_port())
        argv = [sys.executable, "-m", "nodeagent", "--node", node]
        argv += ["--kubeconfig", str(self.bed.cluster.node_agent_kubeconfig)]
        argv += ["--fake-topology", str(self.topology), "--fake-xid-file", str(root / "xid")]
        argv += ["--device-plugin", "true" if plugin else "false"]
        argv += ["--device-plugin-dir", str(root / "device-plugins")]
        argv += ["--pod-resources-socket", str(root / "pod-resources" / "kubelet.sock")]
        argv += ["--interval", "30", "--metrics-port", str(port)]
        self.bed._spawn(f"node-agent-{node}", argv)

    def allocatable(self, node: str) -> str | None:
        """The node's ``nvidia.com/gpu`` allocatable, as the simulated kubelet reports it."""
        status = self.bed.http.request("GET", f"/api/v1/nodes/{node}").get("status") or {}
        value = (status.get("allocatable") or {}).get(GPU_RESOURCE)
        return None if value is None else str(value)

    def wait_allocatable(self, node: str, gpus: int, timeout: float = 60.0) -> None:
        """Wait until the node's device manager offers ``gpus`` GPUs (0: no plugin is registered)."""
        _wait(f"{node} to offer {gpus} GPUs", lambda: self.allocatable(node) == str(gpus), timeout)

    def swap_for_blind_plugin(self, node: str) -> None:
        """Replace phalanx's plugin on the node by a topology-blind one; the agent only reads the truth.

        Waits until the kubelet counted phalanx's plugin out (no GPU allocatable) before the blind one
        registers, and until the blind one offers the GPUs: a pod admitted in between would be rejected.
        """
        self.kill_agent(node, signal.SIGTERM)
        self.wait_allocatable(node, 0)
        self.start_agent(node, plugin=False)
        self.start_blind_plugin(node)
        self.wait_allocatable(node, 8)

    def kill_agent(self, node: str, sig: int = signal.SIGKILL) -> None:
        """Stop the node's agent (a crash with ``SIGKILL``)."""
        self.bed.kill(f"node-agent-{node}", sig)

    def start_blind_plugin(self, node: str) -> None:
        """Serve ``nvidia.com/gpu`` on the node with a plugin that ignores phalanx's choice."""
        argv = [sys.executable, "-m", "testbed.blind_plugin", "--node", node]
        argv += ["--kubeconfig", str(self.bed.kubeconfig), "--dir", str(self.root(node) / "device-plugins")]
        self.bed._spawn(f"blind-plugin-{node}", argv)

    def stop_blind_plugin(self, node: str) -> None:
        """Stop the blind plugin."""
        self.bed.kill(f"blind-plugin-{node}", signal.SIGTERM)

    def inject_xid(self, node: str, gpu: int, xid: int) -> None:
        """Raise NVML Xid ``xid`` on GPU ``gpu`` of the node's fake NVML."""
        with (self.root(node) / "xid").open("a") as handle:
            handle.write(f"{gpu} {xid}\n")

    def remove(self, nodes: Sequence[str]) -> None:
        """Stop the nodes' processes and delete the Nodes."""
        for node in nodes:
            for name in (f"blind-plugin-{node}", f"node-agent-{node}", f"devicemanager-{node}"):
                self.bed.kill(name, signal.SIGTERM)
            self.bed.http.request("DELETE", f"/api/v1/nodes/{node}")

    def _apply_rbac(self) -> None:
        if self._rbac:
            return
        documents: list[Any] = [
            doc
            for path in ("namespace.yaml", "node-agent.yaml")
            for doc in yaml.safe_load_all((REPO / "manifests" / path).read_text())
            if doc and (doc.get("kind") in RBAC_KINDS or doc.get("kind") == "Namespace")
        ]
        text = "\n---\n".join(json.dumps(doc) for doc in documents)
        self.bed.cluster.kubectl("apply", "--server-side", "-f", "-", input=text)
        self._rbac = True


def _with_manager(spec: SimNodeSpec, control: str) -> SimNodeSpec:
    return SimNodeSpec(
        spec.name, spec.gpus, spec.cpu, spec.memory, spec.labels, spec.topology, device_manager=control
    )


def _wait(what: str, probe: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.2)
    msg = f"timed out after {timeout:.0f}s waiting for {what}"
    raise RuntimeError(msg)
