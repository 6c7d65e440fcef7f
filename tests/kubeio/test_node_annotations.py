"""Request shapes of ``kubeio.node_annotations``; the real API server is in tests/e2e/test_node_agent.py."""

from __future__ import annotations

import pytest

from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject
from kubeio.node_annotations import MERGE_PATCH, NodeAnnotations
from tests.kubeio.fake_api import FakeApi, Sent

KEY = "phalanx.io/gpu-topology"


def node(annotations: object, version: str = "7") -> JsonObject:
    return {"metadata": {"name": "gpu-node-1", "resourceVersion": version, "annotations": annotations}}


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        (node({KEY: "{}", "other": "x"}), "{}"),
        (node({"other": "x"}), None),
        (node(None), None),
        ({"metadata": {"name": "gpu-node-1"}}, None),
    ],
    ids=["present", "other-keys-only", "null-annotations", "no-annotations"],
)
def test_get(reply: JsonObject, value: str | None) -> None:
    http = FakeApi(replies=[reply])
    assert NodeAnnotations(http, timeout=4).get("gpu-node-1", KEY) == value
    assert http.sent == [Sent("GET", "/api/v1/nodes/gpu-node-1", {}, None, "application/json", 4)]


@pytest.mark.parametrize("value", ['{"v":1}', None], ids=["set", "remove"])
def test_patch_is_a_merge_patch_of_one_key_without_resource_version(value: str | None) -> None:
    http = FakeApi(replies=[node({KEY: value} if value else {}, "8")], read_only=False)
    assert NodeAnnotations(http).patch("gpu-node-1", KEY, value) == "8"
    (sent,) = http.sent
    assert (sent.method, sent.path, sent.content_type) == ("PATCH", "/api/v1/nodes/gpu-node-1", MERGE_PATCH)
    assert sent.body == {"metadata": {"annotations": {KEY: value}}}


def test_node_names_are_quoted() -> None:
    http = FakeApi(replies=[node({})])
    NodeAnnotations(http).get("a/b", KEY)
    assert http.sent[0].path == "/api/v1/nodes/a%2Fb"


@pytest.mark.parametrize(
    ("call", "reply", "error"),
    [
        ("get", NotFoundError(404, "NotFound", "nodes gpu-node-1 not found"), NotFoundError),
        ("get", node({KEY: 3}), KubeError),
        ("get", node(["not", "a", "map"]), KubeError),
        ("patch", node({KEY: "stale"}), KubeError),
        ("patch", {"metadata": {"annotations": {KEY: "x"}}}, KubeError),
    ],
    ids=["missing-node", "not-a-string", "annotations-not-object", "reply-disagrees", "no-resource-version"],
)
def test_errors_are_kubeio_errors(call: str, reply: JsonObject | Exception, error: type[Exception]) -> None:
    store = NodeAnnotations(FakeApi(replies=[reply], read_only=False))
    request = store.get if call == "get" else lambda node, key: store.patch(node, key, "x")
    with pytest.raises(error):
        request("gpu-node-1", KEY)
