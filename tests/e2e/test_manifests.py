"""The admin's manifests are accepted by a real API server (server-side dry run)."""

from __future__ import annotations

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
