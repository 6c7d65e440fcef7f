"""MPIJobs as their users write them (kubeflow.org/v2beta1), read into the elastic planner's terms."""

from __future__ import annotations

import copy
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from kubeio.convert import ConvertError
from kubeio.mpijob_pods import workers_of
from kubeio.mpijobs import MPIJOBS_PATH, MpiJobWriter, elastic_job, mpijob_from_api, parse_plan
from scheduling.elastic import JobError
from scheduling.elastic.attained import Attained
from scheduling.elastic.operator_lag import OperatorCount
from scheduling.model import Pod, Resources
from tests.builders import a_pod
from tests.kubeio.fake_api import FakeApi

ELASTIC: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v2beta1",
    "kind": "MPIJob",
    "metadata": {
        "name": "mnist",
        "namespace": "ml",
        "uid": "job-uid",
        "creationTimestamp": "2026-11-23T09:00:00Z",
        "annotations": {"phalanx.io/max-workers": "6"},
    },
    "spec": {
        "slotsPerWorker": 2,
        "runPolicy": {"cleanPodPolicy": "Running", "schedulingPolicy": {"minAvailable": 3}},
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "launcher", "image": "x"}]}},
            },
            "Worker": {
                "replicas": 2,
                "template": {
                    "metadata": {"labels": {"phalanx.io/queue": "team-a"}},
                    "spec": {
                        "containers": [
                            {"name": "worker", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}
                        ]
                    },
                },
            },
        },
    },
}


def test_an_elastic_mpijob_as_users_write_it() -> None:
    job = mpijob_from_api(ELASTIC)
    assert (job.key, job.replicas, job.min_available, job.max_workers, job.queue) == (
        "ml/mnist",
        2,
        3,
        "6",
        "team-a",
    )
    assert job.worker == Resources(gpus=2)
    assert job.elastic


def test_a_job_without_the_max_annotation_is_not_elastic() -> None:
    raw = copy.deepcopy(ELASTIC)
    del raw["metadata"]["annotations"]
    assert not mpijob_from_api(raw).elastic


def test_worker_pods_come_by_replica_index_and_the_launcher_is_not_one() -> None:
    job = mpijob_from_api(ELASTIC)

    def pod(name: str, role: str, index: str) -> Pod:
        labels = {"training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/job-role": role}
        if index:
            labels["training.kubeflow.org/replica-index"] = index
        return replace(a_pod(name).gpus(2).build(), labels=MappingProxyType(labels))

    pods = [
        pod("mnist-worker-10", "worker", "10"),
        pod("mnist-launcher", "launcher", ""),
        pod("mnist-worker-2", "worker", "2"),
    ]
    assert [p.name for p in workers_of(job.namespace, job.name, pods)] == [
        "mnist-worker-2",
        "mnist-worker-10",
    ]
    planned = elastic_job(job, pods, "team-a", gpus_in_cluster=32)
    assert (planned.min_workers, planned.max_workers, planned.size) == (2, 6, 2)


def test_a_bad_declaration_is_refused_with_its_reason() -> None:
    raw = copy.deepcopy(ELASTIC)
    raw["metadata"]["annotations"]["phalanx.io/max-workers"] = "1"
    with pytest.raises(JobError, match=r"min workers 2 .* is above max workers 1"):
        elastic_job(mpijob_from_api(raw), [], "team-a", gpus_in_cluster=32)


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        (("spec", "mpiReplicaSpecs"), {"Launcher": {}}, "Worker must be an object"),
        (("spec", "mpiReplicaSpecs", "Worker", "replicas"), "two", "replicas must be a whole number"),
        (("metadata",), None, "metadata must be an object"),
    ],
)
def test_a_malformed_mpijob_is_refused_with_the_field(path: tuple[str, ...], value: object, why: str) -> None:
    raw = copy.deepcopy(ELASTIC)
    target = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ConvertError, match=why):
        mpijob_from_api(raw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1763900000.125", 1763900000.125), ("soon", None), ("nan", None), ("inf", None), (None, None)],
)
def test_the_time_of_the_last_move_is_read_when_it_is_a_number(
    text: str | None, expected: float | None
) -> None:
    raw = copy.deepcopy(ELASTIC)
    if text is not None:
        raw["metadata"]["annotations"]["phalanx.io/elastic-moved-at"] = text
    assert mpijob_from_api(raw).moved_at == expected


def test_listing_keeps_an_unreadable_elastic_job_as_refused_and_leaves_other_unreadable_jobs_out() -> None:
    broken = copy.deepcopy(ELASTIC)
    broken["metadata"]["name"] = "broken"
    broken["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = "two"
    rigid = copy.deepcopy(broken)
    rigid["metadata"] = {"name": "rigid", "namespace": "ml"}  # no max-workers: the operator's business
    api = FakeApi({MPIJOBS_PATH: [broken, rigid, ELASTIC]})
    jobs = MpiJobWriter(api).list()  # type: ignore[arg-type]
    assert [(j.key, j.problem) for j in jobs] == [
        ("ml/broken", "spec.mpiReplicaSpecs.Worker.replicas must be a whole number"),
        ("ml/mnist", None),
    ]
    assert jobs[0].elastic


def test_a_plan_annotation_nested_deeper_than_json_reads_is_no_plan() -> None:
    assert parse_plan("[" * 100_000) == {}
    assert parse_plan('{"nodes": {"n1": "²", "n2": 2}}') == {"n2": 2}


def test_an_elastic_mpijob_submitted_to_kueue_keeps_the_size_kueue_admitted() -> None:
    """Kueue stops a job whose worker count leaves its Workload's, so phalanx neither grows nor shrinks it."""
    raw = copy.deepcopy(ELASTIC)
    raw["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    planned = elastic_job(mpijob_from_api(raw), [], "team-a", gpus_in_cluster=32)
    assert (planned.min_workers, planned.max_workers) == (2, 2)
    assert planned.capped is not None and "LocalQueue team" in planned.capped
    assert "admitted 2 workers" in planned.capped
    free = elastic_job(mpijob_from_api(ELASTIC), [], "team-a", gpus_in_cluster=32)
    assert (free.min_workers, free.max_workers) == (2, 6)


def _with_status(status: object) -> dict[str, Any]:
    raw = copy.deepcopy(ELASTIC)
    raw["status"] = status
    return raw


OPERATOR_STATUS = {  # as the MPI Operator v0.7.0 writes it (omitempty drops zero counts)
    "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}],
    "replicaStatuses": {"Launcher": {"active": 1}, "Worker": {"active": 3}},
    "startTime": "2026-11-23T09:00:01Z",
}


@pytest.mark.parametrize(
    ("status", "active"),
    [
        (None, None),
        ({"conditions": []}, None),
        (OPERATOR_STATUS, 3),
        ({"replicaStatuses": {"Launcher": {"active": 1}, "Worker": {}}}, 0),
        ({"replicaStatuses": {"Worker": {"active": "3"}}}, None),
        ({"replicaStatuses": {"Worker": {"active": True}}}, None),
        ({"replicaStatuses": {"Worker": {"active": -1}}}, None),
        ({"replicaStatuses": ["Worker"]}, None),
    ],
    ids=["none", "no-replicas", "operator", "omitted-zero", "string", "bool", "negative", "list"],
)
def test_the_running_workers_the_operator_recorded_are_read_from_its_status(
    status: object, active: int | None
) -> None:
    assert mpijob_from_api(_with_status(status)).workers_active == active


def test_the_operator_count_is_the_running_workers_below_the_declared_replicas() -> None:
    """What the operator's next sync counts: workers 2 and 3 are past Worker.replicas (it deletes them)."""
    job = mpijob_from_api(_with_status(OPERATOR_STATUS))

    def pod(index: int, *, running: bool) -> Pod:
        labels = {
            "training.kubeflow.org/job-name": "mnist",
            "training.kubeflow.org/job-role": "worker",
            "training.kubeflow.org/replica-index": str(index),
        }
        built = a_pod(f"mnist-worker-{index}").gpus(2)
        return replace((built.on("n1") if running else built).build(), labels=MappingProxyType(labels))

    pods = [pod(0, running=True), pod(1, running=False), pod(2, running=True), pod(3, running=True)]
    planned = elastic_job(job, pods, "team-a", gpus_in_cluster=32)
    assert planned.operator == OperatorCount(recorded=3, actual=1)
    assert planned.operator.lag == "its operator counts 3 running worker(s) where 1 run"


def test_a_resize_and_a_move_are_one_merge_patch_of_the_mpijob() -> None:
    """Each write to an MPIJob wakes its operator (and may land during its status update): one, not two."""
    api = FakeApi(read_only=False)
    plan = '{"nodes": {"n1": 4}}'
    record = Attained(640, 1000.25)
    MpiJobWriter(api).update("ml", "mnist", replicas=4, plan=plan, moved_at=1000.25, attained=record)  # type: ignore[arg-type]
    [sent] = api.writes
    assert (sent.method, sent.content_type) == ("PATCH", "application/merge-patch+json")
    assert sent.body == {
        "metadata": {
            "annotations": {
                "phalanx.io/elastic-plan": '{"nodes": {"n1": 4}}',
                "phalanx.io/elastic-moved-at": "1000.250",
                "phalanx.io/attained-gpu-seconds": '{"at":1000.25,"gpuSeconds":640.0}',
            }
        },
        "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 4}}},
    }
    read = mpijob_from_api({**ELASTIC, "metadata": {**ELASTIC["metadata"], **sent.body["metadata"]}})
    assert (read.moved_at, read.attained) == (1000.25, Attained(640, 1000.25))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"gpuSeconds": 7200, "at": 1763900000}', Attained(7200.0, 1763900000.0)),
        ('{"gpuSeconds": 7200}', None),
        ('{"gpuSeconds": "lots", "at": 1}', None),
        ('{"gpuSeconds": -5, "at": 1}', None),
        ('{"gpuSeconds": 1e999, "at": 1}', None),
        ("[1, 2]", None),
        ("{" * 5000, None),
    ],
)
def test_the_attained_service_record_is_read_when_it_is_one_and_is_none_otherwise(
    text: str, expected: Attained | None
) -> None:
    raw = copy.deepcopy(ELASTIC)
    raw["metadata"]["annotations"]["phalanx.io/attained-gpu-seconds"] = text
    assert mpijob_from_api(raw).attained == expected
