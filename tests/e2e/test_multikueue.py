"""Across clusters with MultiKueue: an MPIJob sent to the worker that can place it whole, and a failover.

Three control planes of their own (``hack/multikueue_bed.py``): the manager (Kueue with MultiKueue, the
MPIJob CRD, phalanx's dispatcher; no nodes) and two workers, each a whole test bed (phalanx, the MPI
Operator, Kueue). Worker ``worker-a`` has two 8-GPU nodes, each with 6 GPUs taken by pods outside Kueue:
its ClusterQueue sees 16 GPUs of quota free, but no node has 4 free GPUs. Worker ``worker-b`` has one
8-GPU node, free. A job of one 4-GPU worker fits only on ``worker-b``; Kueue's quota alone cannot tell.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bed_kueue
import pytest
from localbed import Testbed
from multikueue_bed import LOCAL_QUEUE, MultiKueueBed
from workload import create_mpijob, create_pod, get_mpijob, gpu_pod, list_pods, mpijob, wait_for

from testbed.nodes import fleet

NAMESPACE = "mk"
JOB = "train"


@pytest.fixture(scope="module")
def mk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiKueueBed]:
    bed = MultiKueueBed(
        Path(tmp_path_factory.mktemp("multikueue")),
        {"worker-a": fleet(2, gpus=8), "worker-b": fleet(1, gpus=8)},
    )
    try:
        bed.start()
        bed.add_team(NAMESPACE)
        yield bed
    finally:
        bed.stop()


def workers_of(bed: Testbed) -> list[dict[str, Any]]:
    return [
        p
        for p in list_pods(bed.http, NAMESPACE)
        if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == JOB
        and p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "worker"
    ]


def running_in(bed: Testbed) -> int:
    """Worker pods of the job running in ``bed`` (0 for a worker whose control plane is down)."""
    if not bed.cluster.status().apiserver_ready:
        return 0
    return sum(
        p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
        for p in workers_of(bed)
    )


class Overlap:
    """Checks every second that the job's workers run in at most one cluster at a time."""

    def __init__(self, mk: MultiKueueBed) -> None:
        self.mk = mk
        self.seen: list[dict[str, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            counts = {}
            for name, bed in self.mk.workers.items():
                try:
                    counts[name] = running_in(bed)
                except Exception:  # a worker going down between the check and the list: nothing runs there
                    counts[name] = 0
            self.seen.append(counts)

    @property
    def doubled(self) -> list[dict[str, int]]:
        return [c for c in self.seen if sum(1 for n in c.values() if n) > 1]


def test_a_job_goes_to_the_worker_that_can_place_it_whole_and_fails_over_once(mk: MultiKueueBed) -> None:
    worker_a, worker_b = mk.workers["worker-a"], mk.workers["worker-b"]
    for i, node in enumerate(("gpu-node-1", "gpu-node-2")):
        create_pod(
            worker_a.http,
            NAMESPACE,
            gpu_pod(f"filler-{i}", 6, node_selector={"kubernetes.io/hostname": node}),
        )
    wait_for(
        "worker-a's fillers bound",
        lambda: sum(1 for p in list_pods(worker_a.http, NAMESPACE) if p["spec"].get("nodeName")) == 2,
        timeout=120,
    )

    job = mpijob(JOB, workers=1, gpus_per_worker=4, work_gpu_seconds=4 * 30)
    job["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": LOCAL_QUEUE}
    overlap = Overlap(mk)
    overlap.thread.start()
    try:
        create_mpijob(mk.http, NAMESPACE, job)
        workload = wait_for("the dispatcher's decision", lambda: dispatched(mk), timeout=180)
        print(f"dispatched: {workload}")
        assert "worker-b" in workload and "sent to worker cluster worker-b" in workload
        wait_for("the job's worker running on worker-b", lambda: running_in(worker_b) == 1, timeout=180)
        assert workers_of(worker_a) == [], "worker-a got the job too"

        # worker-a's room is freed; worker-b is lost mid-run. MultiKueue re-dispatches, phalanx says where.
        for i in range(2):
            worker_a.http.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/filler-{i}")
        launcher_done = [
            p for p in list_pods(worker_b.http, NAMESPACE) if p["status"].get("phase") == "Succeeded"
        ]
        assert launcher_done == [], "the job finished on worker-b before it was taken down"
        lost_at = time.monotonic()
        mk.stop_worker("worker-b")
        try:
            wait_for("the job's worker running on worker-a", lambda: running_in(worker_a) == 1, timeout=300)
        except AssertionError:
            for item in bed_kueue.workloads(mk.http, NAMESPACE):
                print(f"manager's Workload {item['metadata']['name']}: {item.get('status')}")
            raise
        print(f"re-dispatched to worker-a {time.monotonic() - lost_at:.0f}s after worker-b was lost")
        wait_for("the job complete on the manager", lambda: succeeded(mk), timeout=300)
        conditions = (get_mpijob(mk.http, NAMESPACE, JOB).get("status") or {}).get("conditions") or []
        done = [c.get("message") for c in conditions if c.get("type") == "Succeeded"]
        print(f"completed once, on worker-a: {done}")
    finally:
        overlap.stop.set()
        overlap.thread.join(5)
    print(
        f"checked {len(overlap.seen)} times, once a second: never in two clusters"
        if not overlap.doubled
        else ""
    )
    assert overlap.seen and overlap.doubled == []


def dispatched(mk: MultiKueueBed) -> str | None:
    for workload in bed_kueue.workloads(mk.http, NAMESPACE):
        events = mk.http.request(
            "GET",
            f"/api/v1/namespaces/{NAMESPACE}/events",
            query={"fieldSelector": f"involvedObject.name={workload['metadata']['name']}"},
        )
        for event in events.get("items") or []:
            if event["reason"] == "Dispatched":
                return str(event["message"])
    return None


def succeeded(mk: MultiKueueBed) -> bool:
    job = get_mpijob(mk.http, NAMESPACE, JOB)
    return any(
        c.get("type") == "Succeeded" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )
