"""phalanx under Kueue v0.17.0: Kueue admits (ClusterQueue quota), phalanx places (gangs, GPU sets, elastic).

Its own test bed: the session's bed runs what phalanx's manifests install, and Kueue is another product.
This one is that configuration (admission gates, both webhooks, three 8-GPU nodes) plus the real MPI
Operator v0.7.0 and the real Kueue v0.17.0 (built from the module proxy, ``hack/kueue``), with a
ClusterQueue of 16 GPUs of the 24 and a LocalQueue ``team`` in each test's namespace. The rule it proves
is docs/kueue.md's: Kueue owns quota, phalanx owns placement, nothing is counted twice.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from itertools import count
from pathlib import Path
from typing import Any

import bed_kueue
import pytest
from localbed import Testbed
from workload import (
    MPIJOBS,
    create_mpijob,
    create_queue,
    delete_pods,
    double_booked,
    elastic_mpijob,
    ensure_namespace,
    get_mpijob,
    get_queue,
    list_pods,
    mpijob,
    queue,
    said,
    wait_for,
)

from kubeio.errors import NotFoundError
from testbed.nodes import fleet, topology_from_file
from tests.e2e.conftest import BRIDGED_A6000, MODES, NODE_GRACE_SECONDS

BRIDGE_PAIRS = {(0, 1), (2, 3), (4, 5), (6, 7)}  # the NV4 pairs of the A6000 box the nodes copy
QUOTA_GPUS = 16
PHALANX_LIMIT = 4


@pytest.fixture(scope="module")
def kueue_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    bed = Testbed(
        Path(tmp_path_factory.mktemp("kueue")),
        placement_grace=3.0,
        node_grace_seconds=NODE_GRACE_SECONDS,
        mpi_operator=True,
    )
    try:
        bed.start()
        bed.add_nodes(fleet(3, gpus=8, racks_per_zone=3, topology=topology_from_file(BRIDGED_A6000)))
        bed.start_kueue()
        bed_kueue.apply(bed.http, bed_kueue.resource_flavor())
        bed_kueue.apply(bed.http, bed_kueue.cluster_queue("gpus", gpus=QUOTA_GPUS))
        # phalanx's default queue capped at 4 GPUs: a job Kueue admitted must not be held by it.
        create_queue(bed.http, queue("default", quota=0, weight=1, limit=PHALANX_LIMIT))
        yield bed
    finally:
        bed.stop()


@pytest.fixture(scope="module", params=MODES)
def bed(request: pytest.FixtureRequest, kueue_bed: Testbed) -> Testbed:
    """The module's bed in each of phalanx's modes in turn: Kueue admits the same way in both."""
    kueue_bed.use_sidecar(request.param == "sidecar")
    return kueue_bed


_names = count()


@pytest.fixture
def ns(bed: Testbed) -> Iterator[str]:
    name = f"kueue-{next(_names)}"
    ensure_namespace(bed.http, name)
    bed_kueue.apply(bed.http, bed_kueue.local_queue(name, "team", "gpus"))
    yield name
    for job in bed.http.request("GET", MPIJOBS.format(namespace=name)).get("items") or []:
        with contextlib.suppress(NotFoundError):
            bed.http.request("DELETE", MPIJOBS.format(namespace=name) + f"/{job['metadata']['name']}")
    delete_pods(bed.http, name, timeout=60)


def submitted(job: dict[str, Any], queue: str = "team") -> dict[str, Any]:
    """The job submitted to Kueue's LocalQueue ``queue``, as Kueue's docs have users write it."""
    job["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = queue
    return job


def job_pods(bed: Testbed, namespace: str, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in list_pods(bed.http, namespace)
        if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == job
    ]


def bound_workers(bed: Testbed, namespace: str, job: str) -> list[dict[str, Any]]:
    return [
        p
        for p in job_pods(bed, namespace, job)
        if p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "worker"
        and p["spec"].get("nodeName")
    ]


def workers_bound(bed: Testbed, namespace: str, job: str, want: int) -> list[dict[str, Any]] | None:
    workers = bound_workers(bed, namespace, job)
    return workers if len(workers) == want else None


def workload_of(bed: Testbed, namespace: str, job: str) -> dict[str, Any] | None:
    for workload in bed_kueue.workloads(bed.http, namespace):
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "MPIJob" and o.get("name") == job for o in owners):
            return workload
    return None


def admitted(bed: Testbed, namespace: str, job: str) -> dict[str, Any] | None:
    workload = workload_of(bed, namespace, job)
    return workload if workload is not None and bed_kueue.has_condition(workload, "Admitted") else None


def suspended(bed: Testbed, namespace: str, job: str) -> bool:
    return bool(get_mpijob(bed.http, namespace, job)["spec"]["runPolicy"].get("suspend"))


def test_kueue_admits_phalanx_binds_whole_and_a_job_over_quota_waits_in_kueue(bed: Testbed, ns: str) -> None:
    create_mpijob(
        bed.http, ns, submitted(mpijob("first", workers=4, gpus_per_worker=2, work_gpu_seconds=1e9))
    )
    wait_for("Kueue admits the first job", lambda: admitted(bed, ns, "first"), timeout=120)
    workers = wait_for(
        "all four workers bound by phalanx", lambda: workers_bound(bed, ns, "first", 4), timeout=120
    )
    placed = {
        w["metadata"]["name"]: (w["spec"]["nodeName"], w["metadata"]["annotations"]["phalanx.io/gpus"])
        for w in workers
    }
    print(f"first (admitted by Kueue, placed by phalanx): {placed}")
    for worker in workers:
        gpus = tuple(int(g) for g in worker["metadata"]["annotations"]["phalanx.io/gpus"].split(","))
        assert gpus in BRIDGE_PAIRS, f"{worker['metadata']['name']} got {gpus}, not a bridged pair"
        assert worker["metadata"]["labels"].get("kueue.x-k8s.io/podset") == "worker"
    group = f"{ns}/first"
    released = wait_for(
        "the release pass's sentence", lambda: said(bed.http, ns, "first", "AdmissionReleased")
    )
    print(f"PodGroup {group}: {released}")
    assert "admitted by Kueue" in released

    # No double accounting: phalanx's default queue (limit 4) neither held the 8-GPU job nor counts it.
    def counted() -> dict[str, Any] | None:
        gpu = (get_queue(bed.http, "default").get("status") or {}).get("gpu")
        return gpu if isinstance(gpu, dict) else None

    gpu = wait_for("phalanx's status of its default queue", counted, timeout=60)
    print(f"phalanx queue default (limit {PHALANX_LIMIT}): {gpu}")
    assert gpu["allocated"] == 0

    # 8 of the ClusterQueue's 16 GPUs are used; a job of 16 waits in Kueue: suspended, not one pod.
    create_mpijob(bed.http, ns, submitted(mpijob("second", workers=2, gpus_per_worker=8, work_gpu_seconds=1)))

    def waiting() -> dict[str, Any] | None:
        workload = workload_of(bed, ns, "second")
        return workload if workload and bed_kueue.has_condition(workload, "QuotaReserved", "False") else None

    pending = wait_for("Kueue to say why the second job waits", waiting, timeout=60)
    reason = next(c for c in pending["status"]["conditions"] if c["type"] == "QuotaReserved")["message"]
    print(f"second: {reason}")
    assert suspended(bed, ns, "second")
    assert job_pods(bed, ns, "second") == [], "a job Kueue has not admitted has pods"

    # The first job leaves: Kueue admits the second, phalanx binds it whole.
    bed.http.request("DELETE", MPIJOBS.format(namespace=ns) + "/first")
    wait_for("Kueue admits the second job", lambda: admitted(bed, ns, "second"), timeout=120)
    workers = wait_for("both 8-GPU workers bound", lambda: workers_bound(bed, ns, "second", 2), timeout=120)
    assert len({w["spec"]["nodeName"] for w in workers}) == 2
    assert double_booked(list_pods(bed.http)) == []


def test_an_elastic_mpijob_stays_inside_what_kueue_admitted(bed: Testbed, ns: str) -> None:
    """Left to phalanx it would grow to 4 workers into free GPUs; under Kueue it stays at the 2 admitted."""
    job = submitted(elastic_mpijob("el", workers=2, gpus_per_worker=2, max_workers="4", min_available=3))
    create_mpijob(bed.http, ns, job)
    wait_for("Kueue admits the elastic job", lambda: admitted(bed, ns, "el"), timeout=120)
    wait_for("both workers bound", lambda: len(bound_workers(bed, ns, "el")) == 2, timeout=120)
    sentence = wait_for(
        "the elastic pass's sentence on the job",
        lambda: said(bed.http, ns, "el", "MaxWorkersCapped", "Kueue"),
        timeout=60,
    )
    print(f"el: {sentence}")
    # The pass writes its target on the job before it resizes anything: 2 workers, not 4.
    plan = wait_for(
        "the elastic pass's plan on the job",
        lambda: (
            get_mpijob(bed.http, ns, "el")["metadata"].get("annotations", {}).get("phalanx.io/elastic-plan")
        ),
        timeout=60,
    )
    print(f"el plan: {plan}")
    assert json.loads(plan)["workers"] == 2
    assert get_mpijob(bed.http, ns, "el")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert admitted(bed, ns, "el") is not None and not suspended(bed, ns, "el")
