"""MutatingWebhookConfigurations as the placement manager reads and patches them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from kubeio.http import JsonObject
from kubeio.webhook_configs import CONFIGS, STRATEGIC_MERGE, Endpoint, Webhook, WebhookConfigs
from tests.kubeio.fake_api import FakeApi

CA = b"-----BEGIN CERTIFICATE-----\n...\n"

RAW = {
    "metadata": {"name": "phalanx-admission-gate", "uid": "u1", "creationTimestamp": "2026-01-01T00:00:00Z"},
    "webhooks": [
        {
            "name": "gates.phalanx.io",
            "clientConfig": {
                "service": {
                    "name": "phalanx-placement-webhook",
                    "namespace": "phalanx-system",
                    "path": "/gate-pods",
                },
                "caBundle": base64.b64encode(CA).decode(),
            },
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                ]
            },
        },
        {"name": "url.phalanx.io", "clientConfig": {"url": "https://127.0.0.1:9443/mutate-pods"}},
        {"name": "broken.phalanx.io", "clientConfig": {"url": "https://[::1/x", "caBundle": "%%%"}},
    ],
}


def served(objects: dict[str, JsonObject]) -> FakeApi:
    """The API server holding ``objects`` (configuration name -> object); writes are recorded."""
    return FakeApi(objects={f"{CONFIGS}/{name}": raw for name, raw in objects.items()}, read_only=False)


def test_endpoints_ca_bundles_and_selectors_are_read_as_the_api_server_uses_them() -> None:
    config = WebhookConfigs(served({"phalanx-admission-gate": RAW})).read("phalanx-admission-gate")
    assert config is not None and (config.uid, config.created) == ("u1", "2026-01-01T00:00:00Z")
    gate, url, broken = config.webhooks
    host = "phalanx-placement-webhook.phalanx-system.svc"
    assert gate.endpoint == Endpoint(
        ("phalanx-system", "phalanx-placement-webhook"), host, 443, "/gate-pods", host
    )
    assert gate.ca_bundle == CA
    assert url.endpoint == Endpoint(None, "127.0.0.1", 9443, "/mutate-pods", "127.0.0.1")
    assert url.ca_bundle == b""
    assert broken.endpoint is None and broken.ca_bundle == b"not base64"
    assert WebhookConfigs(served({})).read("phalanx-admission-gate") is None


def test_the_ca_bundle_is_written_by_webhook_name_with_a_strategic_merge_patch() -> None:
    api = served({"phalanx-admission-gate": RAW})
    WebhookConfigs(api).set_ca_bundle("phalanx-admission-gate", ["gates.phalanx.io"], CA)
    sent = api.sent[-1]
    assert (sent.method, sent.content_type) == ("PATCH", STRATEGIC_MERGE)
    assert sent.path == f"{CONFIGS}/phalanx-admission-gate"
    encoded = base64.b64encode(CA).decode()
    assert sent.body == {"webhooks": [{"name": "gates.phalanx.io", "clientConfig": {"caBundle": encoded}}]}


@pytest.mark.parametrize(
    ("selector", "namespace", "selected"),
    [
        ({}, "ml", True),
        (
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                ]
            },
            "kube-system",
            False,
        ),
        (
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]}
                ]
            },
            "ml",
            True,
        ),
        (
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ml"]}
                ]
            },
            "ml",
            True,
        ),
        ({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "Exists"}]}, "ml", True),
        (
            {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "DoesNotExist"}]},
            "ml",
            False,
        ),
        ({"matchLabels": {"kubernetes.io/metadata.name": "ml"}}, "ml", True),
        ({"matchLabels": {"kubernetes.io/metadata.name": "ml"}}, "other", False),
        ({"matchLabels": {"team": "a"}}, "ml", None),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, "ml", None),
    ],
)
def test_a_namespace_selector_is_decided_on_the_namespace_name_label_alone(
    selector: dict[str, Any], namespace: str, selected: bool | None
) -> None:
    assert Webhook("w", None, b"", selector).selects_namespace(namespace) is selected
