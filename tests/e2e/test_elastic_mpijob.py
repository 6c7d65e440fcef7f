"""An elastic MPIJob through the real MPI Operator, phalanx's extender and its placement manager.

Issue 11's acceptance: the job (min 2, max 6 workers of 2 GPUs) alone grows to 6; a gang that needs
the room makes it shrink (the operator deletes the highest indices, ``discover_hosts.sh`` lists only
the workers left) and binds; when the gang is gone the job grows again. The three 8-GPU nodes are the
managed pool: the placement manager taints them, pins the workers and opens the pool to other pods.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import (
    create_mpijob,
    create_pod,
    create_podgroup,
    get_mpijob,
    list_pods,
    member,
    mpijob,
    podgroup,
    wait_for,
)

from kubeio.errors import NotFoundError
from kubeio.pins import PinWriter

NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3")
ROLE = "training.kubeflow.org/job-role"


@pytest.fixture(scope="module")
def operator(testbed: Testbed) -> Iterator[Testbed]:
    testbed.start_mpi_operator()
    yield testbed
    testbed.stop_mpi_operator()


@pytest.fixture
def pool(operator: Testbed) -> Iterator[Testbed]:
    """The three nodes labelled into the elastic pool; label and taints removed afterwards."""
    for node in NODES:
        operator.http.request(
            "PATCH",
            f"/api/v1/nodes/{node}",
            body={"metadata": {"labels": {"phalanx.io/elastic-pool": "true"}}},
            content_type="application/merge-patch+json",
        )
    try:
        yield operator
    finally:
        pins = PinWriter(operator.http)
        for node in NODES:
            with contextlib.suppress(Exception):
                operator.http.request(
                    "PATCH",
                    f"/api/v1/nodes/{node}",
                    body={"metadata": {"labels": {"phalanx.io/elastic-pool": None}}},
                    content_type="application/merge-patch+json",
                )
                pins.taint_node(node, present=False)


def _running_workers(bed: Testbed, namespace: str) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in list_pods(bed.http, namespace)
        if p["metadata"].get("labels", {}).get(ROLE) == "worker"
        and p["spec"].get("nodeName")
        and p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    )


def _replicas(bed: Testbed, namespace: str) -> int:
    return int(get_mpijob(bed.http, namespace, "elastic")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])


def _discovered(bed: Testbed, namespace: str) -> list[str]:
    config = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/configmaps/elastic-config")
    script = str((config.get("data") or {}).get("discover_hosts.sh", ""))
    return sorted(line.split()[-1].split(".")[0] for line in script.splitlines() if line.startswith("echo"))


def test_an_elastic_job_grows_shrinks_for_a_gang_and_grows_back(pool: Testbed, namespace: str) -> None:
    http = pool.http
    body = mpijob("elastic", workers=2, gpus_per_worker=2, work_gpu_seconds=1e9)
    body["metadata"]["annotations"]["phalanx.io/max-workers"] = "6"
    body["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 3}
    create_mpijob(http, namespace, body)
    try:
        start = time.monotonic()
        wait_for("6 workers running", lambda: len(_running_workers(pool, namespace)) == 6, timeout=90)
        print(f"\nelastic job grew to 6 running workers {time.monotonic() - start:.1f}s after it was created")
        assert _replicas(pool, namespace) == 6
        wait_for("discover_hosts.sh lists 6", lambda: len(_discovered(pool, namespace)) == 6, timeout=30)

        create_podgroup(http, namespace, podgroup("wide", 2))
        for i in range(2):
            create_pod(http, namespace, member(f"wide-{i}", "wide", 8))
        start = time.monotonic()

        def gang_bound() -> bool:
            pods = [p for p in list_pods(http, namespace) if p["metadata"]["name"].startswith("wide-")]
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        wait_for("the 2 x 8 GPU gang bound", gang_bound, timeout=120)
        print(f"the gang bound {time.monotonic() - start:.1f}s after it was created")
        assert _replicas(pool, namespace) == 4
        left = _running_workers(pool, namespace)
        assert left == [f"elastic-worker-{i}" for i in range(4)], "the operator removed the highest indices"
        wait_for(
            "discover_hosts.sh lists the 4 left", lambda: _discovered(pool, namespace) == left, timeout=30
        )

        for i in range(2):
            http.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
            )
        start = time.monotonic()
        wait_for("6 workers running again", lambda: len(_running_workers(pool, namespace)) == 6, timeout=90)
        print(f"the job grew back to 6 {time.monotonic() - start:.1f}s after the gang was gone")
    finally:
        with contextlib.suppress(NotFoundError):
            http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/elastic")
        wait_for("the job's pods deleted", lambda: not list_pods(http, namespace), timeout=60)
