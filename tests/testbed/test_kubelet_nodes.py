"""The simulated kubelet runs only the simulated nodes that are Ready: a not-Ready node's kubelet stopped."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubeio.http import JsonObject, KubeHttp
from testbed.kubelet import SIMULATED_LABEL, SimKubelet
from testbed.nodes import set_ready


class RecordingHttp:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> JsonObject:
        self.calls.append((method, path, kwargs.get("body")))
        return {}


def node(name: str, ready: str) -> JsonObject:
    return {
        "metadata": {"name": name, "labels": {SIMULATED_LABEL: "true"}},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def pod(name: str, node_name: str, **meta: Any) -> JsonObject:
    return {
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}", **meta},
        "spec": {"nodeName": node_name, "containers": [{"name": "main"}]},
        "status": {"phase": "Pending"},
    }


@pytest.mark.parametrize(("ready", "acts"), [("True", True), ("Unknown", False), ("False", False)])
def test_pods_on_a_node_that_is_not_ready_are_neither_started_nor_deleted(ready: str, acts: bool) -> None:
    http = RecordingHttp()
    kubelet = SimKubelet(cast(KubeHttp, http), clock=lambda: 0.0)
    kubelet.nodes_replaced([node("n1", "True")])
    kubelet.node_event("MODIFIED", node("n1", ready))
    kubelet.pod_event("ADDED", pod("p", "n1"))
    kubelet.pod_event("MODIFIED", pod("q", "n1", deletionTimestamp="2026-01-01T00:00:00Z"))
    assert [method for method, _, _ in http.calls] == (["PATCH", "DELETE"] if acts else [])


def test_set_ready_writes_the_condition_as_the_node_lifecycle_controller_would() -> None:
    http = RecordingHttp()
    set_ready(cast(KubeHttp, http), "n1", "Unknown", clock=lambda: 0.0)
    [(method, path, body)] = http.calls
    assert (method, path) == ("PATCH", "/api/v1/nodes/n1/status")
    [condition] = body["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "Ready",
        "Unknown",
        "NodeStatusUnknown",
    )
    with pytest.raises(ValueError, match="Ready status must be one of"):
        set_ready(cast(KubeHttp, http), "n1", "Dead")
