"""kube-scheduler's preemption, narrowed by phalanx, takes an elastic MPIJob's surplus workers, not the job.

An elastic MPIJob (min 2, max 6 workers of 4 GPUs; minAvailable 3 with the launcher) of queue ``px`` at
low priority grows to fill the 24 GPUs. Then a higher-priority pod of the same queue needs a whole node,
the node the launcher runs on (a node selector makes that node the only candidate: there the old rule,
gangs whole, would have evicted the launcher with the workers). kube-scheduler's dry run proposes the
two workers there; phalanx lets them go alone (the job runs 7 members, 4 above its minMember 3), so the
launcher and at least minAvailable members keep running, the MPIJob does not fail, and the pod binds.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import (
    QUEUES,
    condition,
    create_mpijob,
    create_pod,
    create_queue,
    elastic_mpijob,
    get_mpijob,
    get_pod,
    gpu_pod,
    list_pods,
    queue,
    wait_for,
)

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject
from tests.e2e.conftest import deleted_after, preempted, priority_classes, wait_for_operator

ROLE = "training.kubeflow.org/job-role"
JOB_NAME = "training.kubeflow.org/job-name"
LOW, HIGH = "e2e-elastic-low", "e2e-elastic-high"


@pytest.fixture
def classes(operator: Testbed) -> Iterator[Testbed]:
    """Queue ``px`` (24 GPUs of quota) and two PriorityClasses, 10 and 50 (both preemptible in phalanx)."""
    create_queue(operator.http, queue("px", quota=24, weight=1))
    try:
        with priority_classes(operator, {LOW: 10, HIGH: 50}):
            yield operator
    finally:
        with contextlib.suppress(NotFoundError):
            operator.http.request("DELETE", f"{QUEUES}/px")


def _members(bed: Testbed, namespace: str) -> list[JsonObject]:
    """The job's launcher and workers that run and are not on their way out."""
    return [
        p
        for p in list_pods(bed.http, namespace)
        if p["metadata"].get("labels", {}).get(JOB_NAME) == "elastic"
        and p["spec"].get("nodeName")
        and p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def _role(pod: JsonObject) -> str:
    return str(pod["metadata"]["labels"].get(ROLE, ""))


def _job_events(bed: Testbed, namespace: str) -> list[str]:
    query = {"fieldSelector": "involvedObject.name=elastic"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return [f"{e['reason']}: {e['message']}" for e in events]


def test_preemption_takes_surplus_workers_of_an_elastic_job_not_the_job(
    classes: Testbed, namespace: str
) -> None:
    http = classes.http
    body = elastic_mpijob("elastic", workers=2, gpus_per_worker=4, max_workers="6", min_available=3)
    for spec in body["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["metadata"] = {"labels": {"phalanx.io/queue": "px"}}
        spec["template"]["spec"]["priorityClassName"] = LOW
    create_mpijob(http, namespace, body)
    with deleted_after(classes, namespace, "elastic"):
        start = time.monotonic()
        wait_for(
            "the launcher and 6 workers running",
            lambda: sorted(map(_role, _members(classes, namespace))) == ["launcher"] + ["worker"] * 6,
            timeout=120,
        )
        print(f"\nthe job grew to 6 workers (24 GPUs) {time.monotonic() - start:.1f}s after it was created")
        before = {p["metadata"]["name"]: p for p in _members(classes, namespace)}
        launcher = next(p for p in before.values() if _role(p) == "launcher")
        node = str(launcher["spec"]["nodeName"])
        on_node = sorted(
            n for n, p in before.items() if p["spec"]["nodeName"] == node and _role(p) == "worker"
        )
        assert len(on_node) == 2, f"two 4-GPU workers fill the launcher's node {node}: {on_node}"

        urgent = gpu_pod("urgent", 8, node_selector={"kubernetes.io/hostname": node})
        urgent["metadata"]["labels"] = {"phalanx.io/queue": "px"}
        urgent["spec"]["priorityClassName"] = HIGH
        create_pod(http, namespace, urgent)
        try:
            start = time.monotonic()
            fewest = len(before)

            def bound() -> str | None:
                nonlocal fewest
                fewest = min(fewest, len(_members(classes, namespace)))
                name = get_pod(http, namespace, "urgent")["spec"].get("nodeName")
                return str(name) if name else None

            assert wait_for("the urgent pod bound", bound, timeout=90, interval=0.1) == node
            print(f"the urgent pod bound to {node} {time.monotonic() - start:.1f}s after it was created")
            victims = preempted(classes, namespace)
            print(f"preempted: {victims}; fewest job members running meanwhile: {fewest}")
            assert victims == on_node, "kube-scheduler preempted exactly the two workers on the node"
            assert fewest >= 3, "never below minAvailable (the launcher and 2 workers)"

            # The operator re-creates the two preempted workers; the elastic pass shrinks the job to the
            # 16 GPUs left (4 workers), and a worker pinned by the plan before the preemption (to the
            # urgent pod's node) is re-created to be pinned where the plan has room now.
            start = time.monotonic()

            def settled() -> list[str] | None:
                running = sorted(
                    p["metadata"]["name"] for p in _members(classes, namespace) if _role(p) == "worker"
                )
                spec = get_mpijob(http, namespace, "elastic")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
                return running if spec == 4 and running == [f"elastic-worker-{i}" for i in range(4)] else None

            def now() -> tuple[object, ...]:
                spec = get_mpijob(http, namespace, "elastic")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
                pods = [
                    (p["metadata"]["name"], p["spec"].get("nodeName"), p.get("status", {}).get("phase"))
                    for p in list_pods(http, namespace)
                ]
                return spec, pods, _job_events(classes, namespace)[-6:]

            # The MPI Operator re-creates the preempted workers on its next sync of the job, which its
            # per-job backoff can delay by minutes on a busy machine (docs/elastic-mpijobs.md).
            workers = wait_for_operator(
                classes,
                f"{namespace}/elastic",
                "the job settled at workers 0-3 running",
                settled,
                timeout=90,
                describe=now,
            )
            after = _members(classes, namespace)
            job = get_mpijob(http, namespace, "elastic")
            conditions = [(c["type"], c["status"]) for c in (job.get("status") or {}).get("conditions") or []]
            print(
                f"{time.monotonic() - start:.1f}s later: 4 workers running {workers}, conditions {conditions}"
            )
            print(f"events on the MPIJob: {_job_events(classes, namespace)}")
            still = [p for p in after if _role(p) == "launcher"]
            assert [p["metadata"]["uid"] for p in still] == [launcher["metadata"]["uid"]], (
                "the launcher kept running"
            )
            assert len(after) >= 3
            assert not condition(job, "Failed")
            assert get_pod(http, namespace, "urgent")["spec"].get("nodeName") == node
        finally:  # deleted_after waits for every pod of the namespace to go
            with contextlib.suppress(NotFoundError):
                http.request(
                    "DELETE", f"/api/v1/namespaces/{namespace}/pods/urgent", body={"gracePeriodSeconds": 0}
                )
