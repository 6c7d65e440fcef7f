"""``manifests/node-agent.yaml`` says what the agent needs and nothing more."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from nodeagent.settings import ENV_INTERVAL, ENV_NODE
from tests.conftest import REPO


@pytest.fixture(scope="module")
def objects() -> dict[str, Any]:
    with (REPO / "manifests" / "node-agent.yaml").open(encoding="utf-8") as handle:
        return {obj["kind"]: obj for obj in yaml.safe_load_all(handle)}


def test_objects_and_namespace(objects: dict[str, Any]) -> None:
    assert sorted(objects) == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "ServiceAccount"]
    for kind in ("ServiceAccount", "DaemonSet"):
        assert objects[kind]["metadata"]["namespace"] == "phalanx-system"
    subject = objects["ClusterRoleBinding"]["subjects"][0]
    assert (subject["name"], subject["namespace"]) == ("phalanx-node-agent", "phalanx-system")
    assert objects["ClusterRoleBinding"]["roleRef"]["name"] == objects["ClusterRole"]["metadata"]["name"]


def test_rbac_is_get_and_patch_on_nodes_only(objects: dict[str, Any]) -> None:
    assert objects["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}
    ]


def test_daemonset_runs_the_agent_on_gpu_nodes(objects: dict[str, Any]) -> None:
    spec = objects["DaemonSet"]["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == objects["ServiceAccount"]["metadata"]["name"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in spec["tolerations"]
    assert spec["runtimeClassName"] == "nvidia"
    (container,) = spec["containers"]
    assert container["image"] == "ghcr.io/phalanx-scheduler/phalanx:0.1.0"
    assert container["command"] == ["python", "-m", "nodeagent"]
    env = {item["name"]: item for item in container["env"]}
    assert env[ENV_NODE]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env[ENV_INTERVAL]["value"] == "60"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert "nvidia.com/gpu" not in str(container["resources"]), "the agent must not take GPUs from workloads"
    assert container["resources"]["limits"]["memory"] == "128Mi"
