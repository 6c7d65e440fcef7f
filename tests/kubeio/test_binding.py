"""``PodBinder.node_gone``: the API server's word on a node, read just before a gang is bound there."""

from __future__ import annotations

import pytest

from kubeio.binding import PodBinder
from kubeio.errors import KubeError
from kubeio.http import JsonObject
from tests.kubeio.fake_api import FakeApi

NODE_PATH = "/api/v1/nodes/gpu-node-1"


def a_node(*, ready: str | None = "True", deleting: bool = False) -> JsonObject:
    """A v1 Node as the API server returns it, with a Ready condition of ``ready`` (none when ``None``)."""
    meta: JsonObject = {"name": "gpu-node-1", "uid": "u-1", "resourceVersion": "7"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-26T23:00:00Z"
        meta["finalizers"] = ["example.com/drain"]
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready, "reason": "KubeletReady"})
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        (a_node(), ""),
        (None, "node gpu-node-1 was deleted"),
        (a_node(deleting=True), "node gpu-node-1 is being deleted"),
        (a_node(ready="False"), "node gpu-node-1 is not Ready"),
        (a_node(ready="Unknown"), "node gpu-node-1 is not Ready"),
        (a_node(ready=None), "node gpu-node-1 is not Ready"),
        (KubeError(503, "ServiceUnavailable", "etcd is down"), ""),
    ],
    ids=["ready", "deleted", "being-deleted", "not-ready", "unknown", "no-condition", "unreadable"],
)
def test_node_gone_says_why_a_node_cannot_take_a_binding(
    reply: JsonObject | Exception | None, why: str
) -> None:
    api = FakeApi(objects={} if reply is None else {NODE_PATH: reply})
    assert PodBinder(api).node_gone("gpu-node-1") == why  # type: ignore[arg-type]
    assert api.queries == [(NODE_PATH, {})], "one GET of the node, nothing else"
