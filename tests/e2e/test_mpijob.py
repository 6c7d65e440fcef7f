"""An MPIJob as its users write it, through the real MPI Operator v0.7.0, kube-controller-manager and phalanx.

The operator runs with ``--gang-scheduling=phalanx``: it makes the scheduler-plugins PodGroup, the
workers and the launcher Job; kube-controller-manager's Job controller makes the launcher pod; phalanx
binds the gang; the simulated kubelet runs the pods and finishes the launcher when the job's declared
work is done; the operator marks the MPIJob Succeeded.
"""

from __future__ import annotations

import time

import pytest
from localbed import Testbed
from workload import (
    PodTimeline,
    condition,
    create_mpijob,
    double_booked,
    get_mpijob,
    get_podgroup,
    gpus_of,
    list_pods,
    mpijob,
    wait_for,
)

from kubeio.errors import NotFoundError
from kubeio.http import JsonObject
from tests.e2e.conftest import deleted_after

pytestmark = pytest.mark.both_modes

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"


def _podgroup(bed: Testbed, namespace: str, name: str) -> JsonObject | None:
    try:
        return get_podgroup(bed.http, namespace, name)
    except NotFoundError:
        return None


def test_a_default_mpijob_is_bound_whole_by_phalanx_its_launcher_runs_and_it_succeeds(
    operator: Testbed, namespace: str
) -> None:
    http = operator.http
    # 4 workers x 2 GPUs on one 8-GPU node do 8 GPU-seconds of work per second: 4 s of training.
    with deleted_after(operator, namespace, "bert"), PodTimeline(http, namespace) as timeline:
        create_mpijob(http, namespace, mpijob("bert", workers=4, gpus_per_worker=2, work_gpu_seconds=32))
        group = wait_for(
            "the operator's PodGroup", lambda: _podgroup(operator, namespace, "bert"), timeout=30
        )
        assert group["spec"]["minMember"] == 5, "4 workers + the launcher"

        def all_bound() -> list[JsonObject] | None:
            pods = list_pods(http, namespace)
            return pods if len(pods) == 5 and all(p["spec"].get("nodeName") for p in pods) else None

        pods = wait_for("launcher and 4 workers bound", all_bound, timeout=90)
        time.sleep(0.5)  # let the timeline see the last binding
        last_created = max(timeline.created_at.values())
        first_bound, last_bound = min(timeline.bound_at.values()), max(timeline.bound_at.values())
        print(
            f"\nMPIJob bert: last member created -> all 5 bound in {last_bound - last_created:.2f} s "
            f"(bound within {last_bound - first_bound:.2f} s of each other)"
        )
        roles = sorted(p["metadata"]["labels"][JOB_ROLE_LABEL] for p in pods)
        assert roles == ["launcher", "worker", "worker", "worker", "worker"]
        for pod in pods:
            assert pod["spec"]["schedulerName"] == "phalanx"
            assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "bert"
        workers = [p for p in pods if p["metadata"]["labels"][JOB_ROLE_LABEL] == "worker"]
        assert all(len(gpus_of(w)) == 2 for w in workers), "phalanx picks 2 GPU indices per worker"
        assert double_booked(list_pods(http)) == []
        assert first_bound >= last_created, "a member was bound before the whole gang existed"
        assert last_bound - last_created < 5.0, "the gang is bound within a few seconds of its last member"

        def launcher_ran() -> bool:
            return any(
                p["metadata"]["labels"][JOB_ROLE_LABEL] == "launcher"
                and p.get("status", {}).get("phase") in ("Running", "Succeeded")
                for p in list_pods(http, namespace)
            )

        wait_for("the launcher pod running", launcher_ran, timeout=30)
        job = wait_for(
            "the MPIJob Succeeded",
            lambda: j if condition(j := get_mpijob(http, namespace, "bert"), "Succeeded") else None,
            timeout=60,
        )
        assert not condition(job, "Failed")
