"""The user guide's examples (docs/examples/) applied to the real control plane do what the guide says.

Applied with kubectl as a user would: the queues are accepted and valid, the GPU pod gets two GPU
indices, the gang binds whole, and the elastic MPIJob starts through the real MPI Operator in its queue.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import QUEUES, get_pod, get_queue, gpus_of, list_pods, running, wait_for

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject
from tests.conftest import REPO

EXAMPLES = REPO / "docs" / "examples"
DOC_QUEUES = ("team-a", "team-b", "research")  # children before their parent when deleting


def apply(bed: Testbed, name: str, namespace: str | None = None) -> str:
    args = ["apply", "-f", str(EXAMPLES / name)] + (["-n", namespace] if namespace else [])
    done = bed.cluster.kubectl(*args, check=False)
    assert done.returncode == 0, done.stderr
    return str(done.stdout)


@pytest.fixture
def doc_queues(testbed: Testbed) -> Iterator[None]:
    """docs/examples/queues.yaml applied, deleted afterwards."""
    print(apply(testbed, "queues.yaml"))
    yield
    for name in DOC_QUEUES:
        with contextlib.suppress(NotFoundError):
            testbed.http.request("DELETE", f"{QUEUES}/{name}")


def valid(bed: Testbed, name: str) -> bool:
    conditions = get_queue(bed.http, name).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Valid" and c.get("status") == "True" for c in conditions)


def test_the_queues_the_gpu_pod_and_the_gang_do_what_the_guide_says(
    testbed: Testbed, namespace: str, doc_queues: None
) -> None:
    wait_for("the guide's queues valid", lambda: all(valid(testbed, n) for n in DOC_QUEUES), timeout=30)
    apply(testbed, "gpu-pod.yaml", namespace)
    pod = wait_for("finetune bound", lambda: _bound(testbed, namespace, "finetune"), timeout=60)
    assert len(gpus_of(pod)) == 2, pod["metadata"].get("annotations")
    apply(testbed, "gang.yaml", namespace)
    members = wait_for("ddp-0 and ddp-1 bound", lambda: _all_bound(testbed, namespace, "ddp-"), timeout=60)
    assert sorted(len(gpus_of(m)) for m in members) == [4, 4]

    def team_b_counts_the_gang() -> bool:
        return bool(get_queue(testbed.http, "team-b").get("status", {}).get("gpu", {}).get("allocated") == 8)

    wait_for("team-b's status counting the gang's 8 GPUs", team_b_counts_the_gang, timeout=30)


def test_the_elastic_mpijob_starts_in_its_queue(operator: Testbed, namespace: str, doc_queues: None) -> None:
    apply(operator, "elastic-mpijob.yaml", namespace)
    try:
        workers = wait_for(
            "mnist's launcher and 2 workers running",
            lambda: _running_job(operator, namespace),
            timeout=90,
        )
        print(f"running: {workers}")
        assert {
            p["metadata"]["labels"].get("phalanx.io/queue") for p in list_pods(operator.http, namespace)
        } == {"team-a"}
    finally:
        with contextlib.suppress(NotFoundError):
            operator.http.request(
                "DELETE", f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/mnist"
            )
        wait_for("mnist's pods deleted", lambda: not list_pods(operator.http, namespace), timeout=60)


def _bound(bed: Testbed, namespace: str, name: str) -> JsonObject | None:
    pod = get_pod(bed.http, namespace, name)
    return pod if pod["spec"].get("nodeName") and gpus_of(pod) else None


def _all_bound(bed: Testbed, namespace: str, prefix: str) -> list[JsonObject] | None:
    pods = [p for p in list_pods(bed.http, namespace) if p["metadata"]["name"].startswith(prefix)]
    return pods if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods) else None


def _running_job(bed: Testbed, namespace: str) -> list[str] | None:
    pods = [p for p in list_pods(bed.http, namespace) if running(p)]
    roles = [p["metadata"].get("labels", {}).get("training.kubeflow.org/job-role") for p in pods]
    if roles.count("launcher") == 1 and roles.count("worker") >= 2:
        return sorted(str(p["metadata"]["name"]) for p in pods)
    return None
