"""Kubernetes' own gangs (Workload API, v1.36 alpha) scheduled like scheduler-plugins PodGroups.

Its own test bed: the Workload API is alpha and off by default, so the session's bed (what the manifests
install on a default cluster) does not serve it. This one runs the control plane with the gates
``GenericWorkload``, ``GangScheduling`` and ``WorkloadWithJob`` on in kube-apiserver,
kube-controller-manager and kube-scheduler, and ``scheduling.k8s.io/v1alpha2`` served; everything else
is the shipped configuration (admission gates on, both webhooks) on three 8-GPU nodes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from localbed import Testbed
from workload import (
    NATIVE_PODGROUPS,
    create_pod,
    create_podgroup,
    delete_pods,
    double_booked,
    ensure_namespace,
    gang_job,
    kept_gated,
    list_pods,
    member,
    native_member,
    native_podgroup,
    podgroup,
    wait_for,
)

from kubeio.errors import NotFoundError
from testbed.nodes import fleet, topology_from_file
from tests.e2e.conftest import BRIDGED_A6000, NODE_GRACE_SECONDS, why, why_json


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    bed = Testbed(
        Path(tmp_path_factory.mktemp("workload-api")),
        placement_grace=3.0,
        node_grace_seconds=NODE_GRACE_SECONDS,
        workload_api=True,
    )
    try:
        bed.start()
        bed.add_nodes(fleet(3, gpus=8, racks_per_zone=3, topology=topology_from_file(BRIDGED_A6000)))
        yield bed
    finally:
        bed.stop()


_names = count()


@pytest.fixture
def ns(bed: Testbed) -> Iterator[str]:
    name = f"native-{next(_names)}"
    ensure_namespace(bed.http, name)
    yield name
    delete_pods(bed.http, name, timeout=60)


def bound(bed: Testbed, namespace: str, prefix: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in list_pods(bed.http, namespace)
        if p["spec"].get("nodeName") and p["metadata"]["name"].startswith(prefix)
    )


def native_group(bed: Testbed, namespace: str, name: str) -> dict[str, Any]:
    return bed.http.request("GET", NATIVE_PODGROUPS.format(namespace=namespace) + f"/{name}")


def gang_condition(group: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (group.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "phalanx.io/Gang"), None)


def test_a_native_gang_is_bound_all_or_nothing(bed: Testbed, ns: str) -> None:
    bed.http.request("POST", NATIVE_PODGROUPS.format(namespace=ns), body=native_podgroup("train", 3))
    for i in range(2):
        create_pod(bed.http, ns, native_member(f"train-{i}", "train", 8))
    sentence = kept_gated(bed.http, ns, "train", "2 of 3")
    print(f"two of three members: {sentence}")
    assert bound(bed, ns, "train-") == []
    create_pod(bed.http, ns, native_member("train-2", "train", 8))
    wait_for("the whole gang bound", lambda: len(bound(bed, ns, "train-")) == 3, timeout=90)
    pods = list_pods(bed.http, ns)
    print(
        {
            p["metadata"]["name"]: (p["spec"]["nodeName"], p["metadata"]["annotations"]["phalanx.io/gpus"])
            for p in pods
        }
    )
    assert len({p["spec"]["nodeName"] for p in pods}) == 3
    assert double_booked(list_pods(bed.http)) == []

    def placed() -> dict[str, Any] | None:
        c = gang_condition(native_group(bed, ns, "train"))
        return c if c is not None and c["reason"] in ("Scheduled", "Running") else None

    condition = wait_for("phalanx's status on the native PodGroup", placed, timeout=60)
    print(f"phalanx.io/Gang: {condition['status']} {condition['reason']}: {condition['message']}")
    assert condition["status"] == "True"

    # A second gang that cannot fit beside the first waits whole: not one member bound.
    bed.http.request("POST", NATIVE_PODGROUPS.format(namespace=ns), body=native_podgroup("next", 2))
    for i in range(2):
        create_pod(bed.http, ns, native_member(f"next-{i}", "next", 8))
    sentence = kept_gated(bed.http, ns, "next", "")
    print(f"second gang: {sentence}")
    assert bound(bed, ns, "next-") == []


def _same_shape(answer: dict[str, Any], name: str) -> str:
    text = repr({k: answer[k] for k in ("cause", "verdict", "gang", "filterMessage", "admission")})
    return re.sub(rf"\b{re.escape(name)}\b", "NAME", text)


def test_why_answers_a_native_gang_as_it_answers_a_scheduler_plugins_one(bed: Testbed, ns: str) -> None:
    create_podgroup(bed.http, ns, podgroup("plug", 3))
    bed.http.request("POST", NATIVE_PODGROUPS.format(namespace=ns), body=native_podgroup("nat", 3))
    for i in range(2):
        create_pod(bed.http, ns, member(f"plug-{i}", "plug", 2))
        create_pod(bed.http, ns, native_member(f"nat-{i}", "nat", 2))
    kept_gated(bed.http, ns, "plug", "2 of 3")
    kept_gated(bed.http, ns, "nat", "2 of 3")
    plug = why_json(bed, "podgroup/plug", "-n", ns)
    nat = why_json(bed, "podgroup/nat", "-n", ns)
    assert nat["cause"] == "gang_incomplete"
    assert _same_shape(nat, "nat") == _same_shape(plug, "plug")
    pod_answer = why(bed, f"{ns}/nat-0")
    assert pod_answer.returncode == 0, pod_answer.stderr
    assert "2 of 3" in pod_answer.stdout


def test_a_job_made_a_gang_by_the_job_controller_runs_whole(bed: Testbed, ns: str) -> None:
    """``WorkloadWithJob``: the Job controller creates the Workload and PodGroup; phalanx places the gang."""
    bed.http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=gang_job("big", 3, 8, seconds=20))
    wait_for("the Job's three pods bound together", lambda: len(bound(bed, ns, "big-")) == 3, timeout=120)
    groups = bed.http.request("GET", NATIVE_PODGROUPS.format(namespace=ns))["items"]
    assert len(groups) == 1 and groups[0]["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
    group = groups[0]["metadata"]["name"]
    pods = list_pods(bed.http, ns)
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group}
    print(f"Job big: PodGroup {group}, pods on {sorted(p['spec']['nodeName'] for p in pods)}")

    # While it runs, a second such Job does not fit: it waits whole, then runs whole once the first is done.
    bed.http.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=gang_job("after", 2, 8, seconds=1))

    def created() -> list[dict[str, Any]] | None:
        members = job_pods(bed, ns, "after-")
        return members if len(members) == 2 else None

    after = wait_for("the second Job's pods", created)
    second = after[0]["spec"]["schedulingGroup"]["podGroupName"]
    print(f"Job after: {kept_gated(bed.http, ns, second, 'room', timeout=60)}")
    assert running(bed, ns, "big-") == 3, "the first Job finished before the second was seen waiting"
    assert bound(bed, ns, "after-") == [], (
        "a member of the second Job was bound while the first held the GPUs"
    )
    wait_for("the second Job's pods bound together", lambda: len(bound(bed, ns, "after-")) == 2, timeout=120)
    wait_for(
        "both Jobs complete",
        lambda: succeeded(bed, ns, "big") == 3 and succeeded(bed, ns, "after") == 2,
        timeout=120,
    )
    for job in ("big", "after"):
        with contextlib.suppress(NotFoundError):
            bed.http.request(
                "DELETE",
                f"/apis/batch/v1/namespaces/{ns}/jobs/{job}",
                body={"propagationPolicy": "Background"},
            )


def running(bed: Testbed, namespace: str, prefix: str) -> int:
    return sum(p["status"].get("phase") == "Running" for p in job_pods(bed, namespace, prefix))


def job_pods(bed: Testbed, namespace: str, prefix: str) -> list[dict[str, Any]]:
    return [p for p in list_pods(bed.http, namespace) if p["metadata"]["name"].startswith(prefix)]


def succeeded(bed: Testbed, namespace: str, job: str) -> int:
    status = bed.http.request("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}").get("status") or {}
    return int(status.get("succeeded") or 0)
