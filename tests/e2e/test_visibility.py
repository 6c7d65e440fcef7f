"""``phalanx why`` for a team member with only a namespace Role, answered by the visibility endpoint.

A real user of the real API server: a ServiceAccount of namespace A bound there (RoleBinding) to the
shipped ClusterRole ``phalanx-viewer`` (``manifests/viewer.yaml``, applied as is), with a token the
API server issued (TokenRequest). The placement manager of the test bed serves its visibility endpoint
as the manifests configure it (with the webhooks' TLS certificate; its CA is the one the API server
trusts for the gate webhook). Namespace B holds every GPU but 2, so A's pod of 4 GPUs waits, and the
admin's answer names B's pod whose end makes room. The member's answer must be the admin's, that name
replaced, and nothing of namespace B in what they are shown.
"""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from localbed import Testbed
from workload import create_pod, delete_pods, ensure_namespace, kept_gated, wait_pod

from kubeio.errors import KubeError
from kubeio.http import KubeHttp, load_api_client
from scheduling.explain.visible import OTHER
from tests.conftest import REPO
from tests.e2e.conftest import why_json
from tests.e2e.test_why import pod

VIEWER = REPO / "manifests" / "viewer.yaml"


@pytest.fixture
def teams(testbed: Testbed) -> Iterator[tuple[str, str]]:
    """Namespaces ``vis-a`` (the member's) and ``vis-b`` (another team's), emptied afterwards."""
    names = ("vis-a", "vis-b")
    for name in names:
        ensure_namespace(testbed.http, name)
    yield names
    for name in names:
        delete_pods(testbed.http, name, timeout=30)


def member_kubeconfig(bed: Testbed, namespace: str, directory: Path) -> Path:
    """A kubeconfig for the ServiceAccount ``alice`` of ``namespace``, bound there to ``phalanx-viewer``."""
    bed.cluster.kubectl("apply", "-f", str(VIEWER))
    http = bed.http
    with contextlib.suppress(KubeError):
        http.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", body={"metadata": {"name": "alice"}}
        )
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "alice-phalanx-viewer", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "phalanx-viewer"},
        "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": namespace}],
    }
    with contextlib.suppress(KubeError):
        http.request(
            "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", body=binding
        )
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    issued = http.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/alice/token", body=request)
    admin: dict[str, Any] = yaml.safe_load(bed.kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "alice", "user": {"token": issued["status"]["token"]}}],
        "contexts": [{"name": "alice", "context": {"cluster": cluster["name"], "user": "alice"}}],
        "current-context": "alice",
    }
    path = directory / "alice.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def endpoint_ca(bed: Testbed, directory: Path) -> Path:
    """The CA that verifies the placement manager's certificate: the gate webhook's caBundle."""
    config = bed.http.request(
        "GET",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/phalanx-admission-gate-testbed",
    )
    path = directory / "visibility-ca.crt"
    path.write_bytes(base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"]))
    return path


def member_why(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "cli", "--kubeconfig", str(kubeconfig), "why", *args]
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def without_events(answer: dict[str, Any]) -> dict[str, Any]:
    """The answer less its Events, whose counts and times move on between two asks."""
    return {k: v for k, v in answer.items() if k != "events"}


def test_a_namespace_member_gets_the_admins_answer_without_other_namespaces(
    testbed: Testbed, teams: tuple[str, str], tmp_path: Path
) -> None:
    a, b = teams
    for name, node, gpus in (("big1", 1, 8), ("big2", 2, 8), ("mid", 3, 6)):
        create_pod(testbed.http, b, pod(name, gpus, node=node))
    for name in ("big1", "big2", "mid"):
        wait_pod(testbed.http, b, name, "bound", lambda p: bool(p["spec"].get("nodeName")))
    create_pod(testbed.http, a, pod("p", 4))
    kept_gated(testbed.http, a, "p", "needs 4 GPUs")

    kubeconfig = member_kubeconfig(testbed, a, tmp_path)
    member = KubeHttp(load_api_client(str(kubeconfig)), user_agent="alice")
    with pytest.raises(KubeError) as refused:
        member.request("GET", "/api/v1/pods")
    assert refused.value.status == 403, refused.value  # no cluster-wide reads
    member.request("GET", f"/api/v1/namespaces/{a}/pods/p")  # but their own pod

    without = member_why(kubeconfig, f"{a}/p")
    print(without.stderr)
    assert without.returncode == 1
    assert "--visibility-url" in without.stderr
    assert "Traceback" not in without.stderr

    url = f"https://127.0.0.1:{testbed.placement_visibility_ports['placement']}"
    ca = endpoint_ca(testbed, tmp_path)
    visibility = ("--visibility-url", url, "--visibility-ca", str(ca))
    admin = why_json(testbed, f"{a}/p")
    asked = member_why(kubeconfig, f"{a}/p", *visibility, "-o", "json")
    assert asked.returncode == 0, asked.stderr
    answer = orjson.loads(asked.stdout)
    table = member_why(kubeconfig, f"{a}/p", *visibility)
    print(table.stdout)

    assert f"{b}/mid" in json.dumps(admin)  # the admin is told whose end makes room
    expected = json.loads(json.dumps(without_events(admin)).replace(f"{b}/mid", OTHER))
    assert without_events(answer) == expected
    assert answer["cause"] == admin["cause"] == "no_capacity"
    assert answer["whatIf"]["finished"] == [OTHER]
    assert [e["reason"] for e in answer["events"]] == [e["reason"] for e in admin["events"]]
    for shown in (asked.stdout, table.stdout):
        assert b not in shown, shown

    # Another team's pod: refused, with the API server's reason and the caller named.
    other = member_why(kubeconfig, f"{b}/mid", *visibility)
    print(other.stderr)
    assert other.returncode == 1
    assert f'may not get pods "mid" in namespace {b}' in other.stderr
    assert f"system:serviceaccount:{a}:alice" in other.stderr
    assert "Traceback" not in other.stderr
