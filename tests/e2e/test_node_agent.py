"""The node agent's write path on the real API server: the annotation lands once, and only once.

Unit tests prove the publisher patches only on change against an in-memory store; these prove that the
real ``kubeio.node_annotations`` merge patch is accepted by kube-apiserver, leaves the rest of the Node
alone, and that an unchanged topology causes no write (the Node's ``resourceVersion`` stays). Another
test runs the agent process itself, as the DaemonSet does, and stops it with SIGTERM; the last one has
the API server validate ``manifests/node-agent.yaml`` without creating anything.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import yaml
from localbed import REPO, Testbed

from kubeio.http import JsonObject
from kubeio.node_annotations import NodeAnnotations, node_path
from nodeagent.__main__ import load_topology
from nodeagent.fake_nvml import FakeNvml
from nodeagent.nvml_reader import NvmlTopologyReader
from nodeagent.publisher import PublishOutcome, TopologyPublisher
from scheduling.model import TOPOLOGY_ANNOTATION
from tests.scheduling.topology.shared_files import BY_NAME, TOPOLOGIES, document

NODE = "gpu-node-1"


@dataclass
class CountingStore:
    """The real annotation writer, counting the patches it sends."""

    real: NodeAnnotations
    patches: list[str | None] = field(default_factory=list)

    def get(self, node: str, key: str) -> str | None:
        return self.real.get(node, key)

    def patch(self, node: str, key: str, value: str | None) -> str:
        self.patches.append(value)
        return self.real.patch(node, key, value)


@pytest.fixture
def writer(testbed: Testbed) -> Iterator[NodeAnnotations]:
    """The real writer; afterwards the node gets back the annotation it had, for the session's other tests."""
    store = NodeAnnotations(testbed.http)
    before = store.get(NODE, TOPOLOGY_ANNOTATION)
    yield store
    store.patch(NODE, TOPOLOGY_ANNOTATION, before)


def read_node(testbed: Testbed) -> JsonObject:
    return testbed.http.request("GET", node_path(NODE))


def test_publisher_writes_the_annotation_once(testbed: Testbed, writer: NodeAnnotations) -> None:
    doc = document("p4d-a100")
    before = read_node(testbed)
    store = CountingStore(writer)
    publisher = TopologyPublisher(store, NODE)

    assert publisher.publish(doc) is PublishOutcome.PATCHED
    node = read_node(testbed)
    assert node["metadata"]["annotations"][TOPOLOGY_ANNOTATION] == doc.to_json()
    assert node["metadata"]["labels"] == before["metadata"]["labels"], "the merge patch touched only its key"
    assert node["status"]["allocatable"] == before["status"]["allocatable"]
    version = node["metadata"]["resourceVersion"]

    assert publisher.publish(doc) is PublishOutcome.UNCHANGED
    assert store.patches == [doc.to_json()], "the second publish sent no patch"
    assert read_node(testbed)["metadata"]["resourceVersion"] == version

    changed = document("v100-cubemesh")
    assert publisher.publish(changed) is PublishOutcome.PATCHED
    after = read_node(testbed)
    assert after["metadata"]["annotations"][TOPOLOGY_ANNOTATION] == changed.to_json()
    assert after["metadata"]["resourceVersion"] != version


def test_agent_process_publishes_and_stops_on_sigterm(testbed: Testbed, writer: NodeAnnotations) -> None:
    matrix = BY_NAME["a6000-8"]
    topology = load_topology(TOPOLOGIES / matrix.file, matrix.model)
    expected = NvmlTopologyReader(FakeNvml(topology)).read().document
    assert expected is not None
    argv = [
        sys.executable,
        "-m",
        "nodeagent",
        "--kubeconfig",
        str(testbed.kubeconfig),
        "--node",
        NODE,
        "--interval",
        "0.2",
        "--fake-topology",
        str(TOPOLOGIES / matrix.file),
        "--fake-gpu-model",
        matrix.model,
    ]
    agent = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 30
        while writer.get(NODE, TOPOLOGY_ANNOTATION) != expected.to_json():
            assert agent.poll() is None, agent.communicate()[0]
            assert time.monotonic() < deadline, "the agent published nothing in 30 s"
            time.sleep(0.1)
        version = read_node(testbed)["metadata"]["resourceVersion"]
        time.sleep(1.0)  # about five more cycles, all finding the same topology
        assert read_node(testbed)["metadata"]["resourceVersion"] == version
        agent.send_signal(signal.SIGTERM)
        output, _ = agent.communicate(timeout=10)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 0, output
    assert "stopped" in output
    assert output.count("published the topology") == 1, output


def test_the_manifest_passes_a_server_side_dry_run(testbed: Testbed) -> None:
    objects = list(yaml.safe_load_all((REPO / "manifests" / "node-agent.yaml").read_text(encoding="utf-8")))
    for obj in objects:  # phalanx-system may not exist in this session; a dry run cannot create it
        if "namespace" in obj["metadata"]:
            obj["metadata"]["namespace"] = "default"
    result = testbed.cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(objects), check=False
    )
    assert result.returncode == 0, result.stderr
    for expected in (
        "serviceaccount/phalanx-node-agent",
        "clusterrole.rbac.authorization.k8s.io/phalanx-node-agent",
        "clusterrolebinding.rbac.authorization.k8s.io/phalanx-node-agent",
        "daemonset.apps/phalanx-node-agent",
    ):
        assert f"{expected} created (server dry run)" in result.stdout, result.stdout
