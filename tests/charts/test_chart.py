"""The Helm chart (charts/phalanx), rendered by the Helm built from hack/helm: the manifests' objects.

By default the chart must render exactly what ``kubectl kustomize manifests/`` renders (what
``kubectl apply -k manifests/`` applies): the same objects, field for field; with ``scheduler.mode:
sidecar``, what ``kubectl kustomize sidecar/`` renders. Each value then changes what it says it
changes, and nothing else.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from chart import SIDECAR, ChartError, ObjectKey, differences, kustomize, lint, objects, render

APPS = "apps/v1"
WEBHOOKS = "admissionregistration.k8s.io/v1"


@pytest.fixture(scope="module")
def default() -> dict[ObjectKey, dict[str, Any]]:
    return objects(render())


def env(rendered: dict[ObjectKey, dict[str, Any]], kind: str, name: str) -> dict[str, str]:
    container = rendered[(APPS, kind, "phalanx-system", name)]["spec"]["template"]["spec"]["containers"][-1]
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def test_the_default_render_is_the_kustomization_object_for_object(default: dict[ObjectKey, Any]) -> None:
    lines = differences(default, objects(kustomize()))
    print("\n".join(lines))
    assert lines == []
    kinds = {key[1] for key in default}
    assert {"CustomResourceDefinition", "Deployment", "DaemonSet", "MutatingWebhookConfiguration"} <= kinds


def test_the_chart_lints_strictly() -> None:
    assert "0 chart(s) failed" in lint()


def test_a_changed_object_is_reported_field_by_field(default: dict[ObjectKey, Any]) -> None:
    changed = objects(render({"placement": {"replicas": 3}}))
    lines = differences(changed, default)
    assert lines[0] == "differs: apps/v1/Deployment/phalanx-system/phalanx-placement"
    assert "-  replicas: 2" in lines and "+  replicas: 3" in lines


def test_values_change_what_they_name() -> None:
    rendered = objects(
        render(
            {
                "placement": {"replicas": 3},
                "scheduler": {"replicas": 1},
                "webhookCerts": {"mode": "files", "secretName": "from-cert-manager"},
                "admissionGates": {"enabled": False},
                "elasticPool": {"growStep": 8, "pinTaintEffect": "PreferNoSchedule"},
                "metrics": {"placementPort": 9100, "grafanaDashboard": False},
                "image": {"tag": "0.2.0"},
            }
        )
    )
    placement = rendered[(APPS, "Deployment", "phalanx-system", "phalanx-placement")]
    assert placement["spec"]["replicas"] == 3
    assert rendered[(APPS, "Deployment", "phalanx-system", "phalanx-scheduler")]["spec"]["replicas"] == 1
    settings = env(rendered, "Deployment", "phalanx-placement")
    assert settings["PHALANX_WEBHOOK_CERTS"] == "files"
    assert settings["PHALANX_ADMISSION_GATES"] == "false"
    assert settings["PHALANX_ELASTIC_GROW_STEP"] == "8"
    assert settings["PHALANX_PIN_TAINT_EFFECT"] == "PreferNoSchedule"
    assert settings["PHALANX_PLACEMENT_METRICS_PORT"] == "9100"
    pod = placement["spec"]["template"]["spec"]
    assert {"name": "metrics", "containerPort": 9100} in pod["containers"][0]["ports"]
    assert pod["volumes"][0]["secret"]["secretName"] == "from-cert-manager"
    assert pod["containers"][0]["image"] == "ghcr.io/phalanx-scheduler/phalanx:0.2.0"
    assert (WEBHOOKS, "MutatingWebhookConfiguration", "", "phalanx-admission-gate") not in rendered
    assert (WEBHOOKS, "MutatingWebhookConfiguration", "", "phalanx-pin-webhook") in rendered
    assert ("v1", "ConfigMap", "phalanx-system", "phalanx-grafana-dashboard") not in rendered


def test_visibility_port_zero_serves_no_visibility_endpoint() -> None:
    rendered = objects(render({"visibility": {"port": 0}}))
    assert "PHALANX_VISIBILITY_PORT" not in env(rendered, "Deployment", "phalanx-placement")
    placement = rendered[(APPS, "Deployment", "phalanx-system", "phalanx-placement")]
    assert [p["name"] for p in placement["spec"]["template"]["spec"]["containers"][0]["ports"]] == [
        "metrics",
        "webhook",
    ]
    service = rendered[("v1", "Service", "phalanx-system", "phalanx-placement-webhook")]
    assert [p["name"] for p in service["spec"]["ports"]] == ["webhook"]


def test_the_elastic_pool_keeps_the_placement_managers_defaults_unless_set(
    default: dict[ObjectKey, Any],
) -> None:
    names = env(default, "Deployment", "phalanx-placement")
    assert not [name for name in names if "ELASTIC" in name or "PIN_TAINT" in name]


SIDECAR_MODE = {"scheduler": {"mode": "sidecar"}}


def pod(rendered: dict[ObjectKey, dict[str, Any]], deployment: str) -> dict[str, Any]:
    spec = rendered[(APPS, "Deployment", "phalanx-system", deployment)]["spec"]
    return dict(spec["template"]["spec"])


def test_the_sidecar_render_is_the_sidecar_kustomization_object_for_object() -> None:
    rendered = objects(render(SIDECAR_MODE))
    lines = differences(rendered, objects(kustomize(SIDECAR)))
    print("\n".join(lines))
    assert lines == []
    scheduler = pod(rendered, "phalanx-scheduler")
    assert [c["command"][0] for c in scheduler["containers"]] == ["phalanx-scheduler"]
    assert ("rbac.authorization.k8s.io/v1", "ClusterRole", "", "phalanx-extender") not in rendered


def test_the_plan_key_secret_is_the_one_both_deployments_mount() -> None:
    rendered = objects(render({"scheduler": {"mode": "sidecar", "planKeySecret": "sealed-plans"}}))
    for name in ("phalanx-scheduler", "phalanx-placement"):
        volumes = pod(rendered, name)["volumes"]
        assert {"name": "plan-key", "secret": {"secretName": "sealed-plans"}} in volumes, name
    assert env(rendered, "Deployment", "phalanx-placement")["PHALANX_GATE_PLAN_ON_POD"] == "true"


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"scheduler": {"mode": "sidecars"}}, "scheduler.mode must be extender or sidecar, got sidecars"),
        (
            {"scheduler": {"mode": "sidecar"}, "admissionGates": {"enabled": False}},
            "scheduler.mode sidecar needs admissionGates.enabled",
        ),
    ],
)
def test_a_mode_the_chart_cannot_install_fails_the_render_with_the_reason(
    values: dict[str, Any], reason: str
) -> None:
    with pytest.raises(ChartError, match=reason):
        render(values)
