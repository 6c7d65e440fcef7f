"""``manifests/node-agent.yaml`` says what the agent needs and nothing more."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from nodeagent.agent_settings import (
    DEVICE_PLUGIN_DIR,
    ENV_DEVICE_PLUGIN,
    ENV_DEVICE_PLUGIN_DIR,
    ENV_INTERVAL,
    ENV_NODE,
    ENV_POD_RESOURCES,
    POD_RESOURCES_SOCKET,
    parse_settings,
)
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


def test_rbac_reads_its_node_and_pods_and_patches_annotations_only(objects: dict[str, Any]) -> None:
    assert objects["ClusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
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
    assert container["resources"]["limits"]["memory"] == "256Mi"


def test_the_agent_serves_the_plugin_on_the_kubelet_sockets_it_mounts(objects: dict[str, Any]) -> None:
    spec = objects["DaemonSet"]["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    env = {item["name"]: item.get("value", "") for item in container["env"]}
    settings = parse_settings([], {**env, ENV_NODE: "n"})
    assert settings.device_plugin, f"{ENV_DEVICE_PLUGIN}: mode enforce is the manifest's default"
    assert (env[ENV_DEVICE_PLUGIN_DIR], env[ENV_POD_RESOURCES]) == (DEVICE_PLUGIN_DIR, POD_RESOURCES_SOCKET)
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert DEVICE_PLUGIN_DIR in mounts
    assert mounts[POD_RESOURCES_SOCKET.rsplit("/", 1)[0]]["readOnly"] is True
