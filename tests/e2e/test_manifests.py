"""The admin's manifests are accepted by a real API server (server-side dry run)."""

from __future__ import annotations

import yaml
from localbed import Testbed
from workload import ensure_namespace

from tests.conftest import REPO


def test_manifests_apply_cleanly_with_a_server_side_dry_run(testbed: Testbed) -> None:
    ensure_namespace(testbed.http, "phalanx-system")  # a dry run cannot create what namespaced objects need
    result = testbed.cluster.kubectl("apply", "-k", str(REPO / "manifests"), "--dry-run=server", check=False)
    assert result.returncode == 0, result.stderr
    applied = result.stdout
    for expected in (
        "deployment.apps/phalanx-scheduler created (server dry run)",
        "configmap/phalanx-scheduler-config created (server dry run)",
        "configmap/phalanx-grafana-dashboard created (server dry run)",
        "clusterrole.rbac.authorization.k8s.io/phalanx-extender created (server dry run)",
        "secret/phalanx-placement-webhook-certs created (server dry run)",
    ):
        assert expected in applied, applied


def test_the_sidecar_install_applies_cleanly_and_runs_no_extender(testbed: Testbed) -> None:
    """``kubectl apply -k sidecar/``: the manifests with the framework sidecar instead of the extender."""
    ensure_namespace(testbed.http, "phalanx-system")
    result = testbed.cluster.kubectl("apply", "-k", str(REPO / "sidecar"), "--dry-run=server", check=False)
    assert result.returncode == 0, result.stderr
    assert "deployment.apps/phalanx-scheduler created (server dry run)" in result.stdout, result.stdout
    rendered = testbed.cluster.kubectl("kustomize", str(REPO / "sidecar"), check=False)
    assert rendered.returncode == 0, rendered.stderr
    deployments = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]
        for d in yaml.safe_load_all(rendered.stdout)
        if d and d["kind"] == "Deployment"
    }
    scheduler = deployments["phalanx-scheduler"]
    assert [(c["name"], c["command"][0]) for c in scheduler["containers"]] == [
        ("kube-scheduler", "phalanx-scheduler")
    ]
    for name in ("phalanx-scheduler", "phalanx-placement"):
        volumes = {v["name"]: v for v in deployments[name]["volumes"]}
        assert volumes["plan-key"]["secret"] == {"secretName": "phalanx-plan-key"}, name
    roles = {
        (d["kind"], d["metadata"]["name"])
        for d in yaml.safe_load_all(rendered.stdout)
        if d and d["kind"] in ("ClusterRole", "ClusterRoleBinding")
    }
    assert not {r for r in roles if r[1] == "phalanx-extender"}, "the extender's role, with no extender"
    assert ("ClusterRoleBinding", "phalanx-scheduler-as-kube-scheduler") in roles
