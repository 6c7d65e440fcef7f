"""Fixtures for end-to-end tests on the real local control plane (hack/localcluster/).

One test bed per test session: etcd, kube-apiserver and kube-scheduler built from the pinned Kubernetes
release, the extender under gunicorn, the simulated kubelet, and simulated 8-GPU nodes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from itertools import count
from pathlib import Path

import pytest

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from localbed import Testbed
from workload import (
    QUEUES,
    create_pod,
    create_podgroup,
    create_queue,
    delete_pods,
    ensure_namespace,
    list_pods,
    live,
    member,
    podgroup,
    queue,
    wait_for,
)

from kubeio.errors import NotFoundError
from testbed.nodes import fleet, topology_from_file

BRIDGED_A6000 = REPO / "hack" / "topologies" / "rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e carries the ``e2e`` marker, so ``-m 'not e2e'`` selects unit tests."""
    for item in items:
        if "tests/e2e" in str(item.path):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A running test bed with three simulated 8x RTX A6000 nodes (NVLink bridge pairs), torn down after."""
    bed = Testbed(Path(tmp_path_factory.mktemp("testbed")), placement_grace=3.0)
    try:
        bed.start()
        bed.add_nodes(fleet(3, gpus=8, racks_per_zone=3, topology=topology_from_file(BRIDGED_A6000)))
        yield bed
    finally:
        bed.stop()


_names = count()


@pytest.fixture
def namespace(testbed: Testbed) -> Iterator[str]:
    """A fresh namespace; its pods are deleted afterwards so every test starts with free GPUs."""
    name = f"e2e-{next(_names)}"
    ensure_namespace(testbed.http, name)
    yield name
    delete_pods(testbed.http, name, timeout=30)


@pytest.fixture(scope="session")
def operator(testbed: Testbed) -> Iterator[Testbed]:
    """The session's test bed with the MPI Operator running, from the first test that asks to the end.

    Once per session: the stock operator's health port (8080) is hard-coded, so a stop and a start
    between modules would race for it; left running, it acts only on MPIJobs.
    """
    testbed.start_mpi_operator()
    yield testbed
    testbed.stop_mpi_operator()


@contextlib.contextmanager
def deleted_after(bed: Testbed, namespace: str, name: str) -> Iterator[None]:
    """Delete the MPIJob afterwards; the garbage collector deletes its pods, Job and PodGroup."""
    try:
        yield
    finally:
        with contextlib.suppress(NotFoundError):
            bed.http.request("DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/{name}")
        wait_for("the job's pods deleted", lambda: not list_pods(bed.http, namespace), timeout=60)


@pytest.fixture
def queues(testbed: Testbed) -> Iterator[None]:
    """A (quota 8, weight 1, limit 12), B (quota 8, weight 1), C (quota 0, weight 2) on 24 GPUs."""
    for body in (
        queue("a", quota=8, weight=1, limit=12),
        queue("b", quota=8, weight=1),
        queue("c", quota=0, weight=2),
    ):
        create_queue(testbed.http, body)
    yield
    for name in ("a", "b", "c"):
        with contextlib.suppress(NotFoundError):
            testbed.http.request("DELETE", f"{QUEUES}/{name}")


def gang(
    testbed: Testbed, namespace: str, name: str, queue_name: str, *, pods: int = 2, gpus: int = 2
) -> None:
    create_podgroup(testbed.http, namespace, podgroup(name, pods))
    for i in range(pods):
        pod = member(f"{name}-{i}", name, gpus)
        pod["metadata"]["labels"]["phalanx.io/queue"] = queue_name
        create_pod(testbed.http, namespace, pod)


def bound_gangs(testbed: Testbed, namespace: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in list_pods(testbed.http, namespace):
        group = pod["metadata"].get("labels", {}).get("scheduling.x-k8s.io/pod-group")
        if group:
            counts.setdefault(group, 0)
            if live(pod) and not pod["metadata"].get("deletionTimestamp"):
                counts[group] += 1
    return counts
