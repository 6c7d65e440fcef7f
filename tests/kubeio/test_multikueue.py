"""MultiKueue's Workloads as phalanx's dispatcher reads them: which wait for a worker, as what pods."""

from __future__ import annotations

from typing import Any

from kubeio.multikueue import WORKLOADS_PATH, active_workers, waiting_workloads
from scheduling.model import Resources
from tests.kubeio.fake_api import FakeApi

CLUSTERS = "/apis/kueue.x-k8s.io/v1beta2/multikueueclusters"


def workload(
    name: str, *, nominated: list[str] | None = None, cluster: str | None = None, state: str = "Pending"
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
        "admissionChecks": [{"name": "multikueue", "state": state}],
    }
    if nominated is not None:
        status["nominatedClusterNames"] = nominated
    if cluster is not None:
        status["clusterName"] = cluster
    worker = {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}
    return {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}"},
        "spec": {
            "podSets": [
                {"name": "launcher", "count": 1, "template": {"spec": {"containers": [{"name": "l"}]}}},
                {"name": "worker", "count": 2, "template": {"spec": worker}},
            ]
        },
        "status": status,
    }


def cluster(name: str, active: bool) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Active", "status": str(active)}]}}


def test_a_workload_waits_until_a_reachable_worker_is_nominated() -> None:
    api = FakeApi(
        {
            WORKLOADS_PATH: [
                workload("new"),
                workload("on-a", nominated=["a"]),
                workload("on-lost-b", nominated=["b"]),
                workload("placed", cluster="a"),
                workload("checked", state="Ready"),
            ],
            CLUSTERS: [cluster("a", True), cluster("b", False)],
        }
    )
    active = active_workers(api)
    assert active == frozenset({"a"})
    waiting, problems = waiting_workloads(api, frozenset({"multikueue"}), active)
    assert [w.key for w in waiting] == ["ml/new", "ml/on-lost-b"]
    assert problems == []


def test_a_workloads_pod_sets_become_its_gang() -> None:
    api = FakeApi({WORKLOADS_PATH: [workload("job")]})
    (job,), _ = waiting_workloads(api, frozenset({"multikueue"}), frozenset())
    assert [(p.name, p.requests.gpus, p.group) for p in job.pods] == [
        ("job-launcher-0", 0, "job"),
        ("job-worker-0", 4, "job"),
        ("job-worker-1", 4, "job"),
    ]
    assert job.pods[1].requests == Resources(gpus=4)


def test_a_workload_that_cannot_be_read_is_said_and_the_others_kept() -> None:
    bad = workload("bad")
    bad["spec"]["podSets"][1]["count"] = "many"
    api = FakeApi({WORKLOADS_PATH: [bad, workload("good")]})
    waiting, problems = waiting_workloads(api, frozenset({"multikueue"}), frozenset())
    assert [w.key for w in waiting] == ["ml/good"]
    assert len(problems) == 1 and problems[0].startswith("Workload ml/bad")
