"""Hostile objects through the real API server: each one's fault stays with that object.

One storm, created through the API server beside the real MPI Operator, and left in place while the
tests run: Nodes advertising ``9999999999999999999Ei`` and 4,000,000 ``nvidia.com/gpu``; a Queue chain
1,100 deep; Queues with an unknown parent (and a child), a parent cycle, a child whose quota does not
fit its parent's; Queues the CRD's CEL rules refuse; a node and a queue created, seen and deleted; a
PodGroup whose plan annotation is nested past any JSON parser's depth; pods naming a queue set aside;
MPIJobs whose ``phalanx.io/max-workers`` is ``"²"`` or 5,000 digits, whose workers ask for no GPU with
``max-workers: 100000``, whose workers are bound to a node that is then deleted, and whose attained
service record is nested past any JSON parser's depth or dated far ahead. With every one of
them still there, a normal 1-GPU pod and a 2-pod gang bind within seconds, elastic jobs beside them are
sized, every hostile object carries its reason (an event or a Queue condition), deleted objects leave
phalanx's caches, and neither phalanx process crashed or logged a failed pass.

Admission gates on or off: a pod created gated is released by the placement manager like any other,
so nothing here depends on the test bed's mode.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from localbed import Testbed
from workload import (
    QUEUES,
    create_mpijob,
    create_pod,
    create_podgroup,
    delete_pods,
    elastic_mpijob,
    ensure_namespace,
    events_for,
    get_mpijob,
    get_queue,
    gpu_pod,
    list_pods,
    member,
    metric_value,
    podgroup,
    queue,
    running,
    scrape,
    wait_for,
)

from kubeio.attained import ATTAINED_ANNOTATION, parse_attained
from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject
from testbed.nodes import SimNodeSpec
from tests.conftest import REPO

NS = "hostile"
MARK = {"phalanx.io/test": "hostile"}
"""Label on every cluster-scoped object the storm makes, so that one collection delete removes them."""
DEEP = 1100
LAST = f"hostile-deep-{DEEP - 1}"
MPIJOBS = f"/apis/kubeflow.org/v2beta1/namespaces/{NS}/mpijobs"
REAL_NODES = {"gpu-node-1", "gpu-node-2", "gpu-node-3"}


@dataclass
class Storm:
    """The test bed with the storm in place, and what the storm itself observed."""

    bed: Testbed
    refused_at_admission: dict[str, str]
    logs_from: dict[str, int]


def _absurd_node(bed: Testbed, name: str, gpus: str) -> None:
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(MARK)}}
    bed.http.request("POST", "/api/v1/nodes", body=body)
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus}
    ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "hostile"}
    status = {"status": {"capacity": resources, "allocatable": resources, "conditions": [ready]}}
    patch = "application/merge-patch+json"
    bed.http.request("PATCH", f"/api/v1/nodes/{name}/status", body=status, content_type=patch)
    bed.http.request("PATCH", f"/api/v1/nodes/{name}", body={"spec": {"taints": None}}, content_type=patch)


def _queue(bed: Testbed, name: str, *, quota: int = 0, parent: str | None = None) -> None:
    body = queue(name, quota=quota, weight=1, parent=parent)
    body["metadata"]["labels"] = dict(MARK)
    bed.http.request("POST", QUEUES, body=body)


def _refused(bed: Testbed, name: str, spec: dict[str, Any]) -> str:
    body = {"apiVersion": "scheduling.phalanx.io/v1alpha1", "kind": "Queue", "metadata": {"name": name}}
    try:
        bed.http.request("POST", QUEUES, body={**body, "spec": spec})
    except KubeError as exc:
        return str(exc)
    return ""


def _placement_pages(bed: Testbed) -> list[str]:
    ports = bed.placement_metrics_ports
    return [
        scrape(f"http://127.0.0.1:{port}/metrics") for name, port in ports.items() if bed.is_running(name)
    ]


def _seen(bed: Testbed, metric: str, **labels: str) -> bool:
    return any(metric_value(page, metric, **labels) is not None for page in _placement_pages(bed))


def _unseen(bed: Testbed, metric: str, **labels: str) -> bool:
    return not _seen(bed, metric, **labels)


FAR_AHEAD = '{"gpuSeconds": 5, "at": 1e15}'
"""An attained service record dated some 30 million years ahead."""


def _with_record(job: JsonObject, record: str) -> JsonObject:
    job["metadata"]["annotations"][ATTAINED_ANNOTATION] = record
    return job


def _elastic(name: str, *, max_workers: str, gpus: int = 1, workers: int = 2) -> JsonObject:
    return elastic_mpijob(
        name, workers=workers, gpus_per_worker=gpus, max_workers=max_workers, min_available=3
    )


def _workers(bed: Testbed, job: str, *, on: str | None = None) -> list[JsonObject]:
    return [
        p
        for p in list_pods(bed.http, NS)
        if p["metadata"].get("labels", {}).get("training.kubeflow.org/job-name") == job
        and p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "worker"
        and running(p)
        and not p["metadata"].get("deletionTimestamp")
        and (on is None or p["spec"].get("nodeName") == on)
    ]


def _condition(bed: Testbed, name: str) -> dict[str, str] | None:
    conditions = (get_queue(bed.http, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Valid"), None)


def _log_sizes(bed: Testbed) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in bed.logs.glob("*.log")}


def _deep_queue(bed: Testbed, i: int) -> None:
    _queue(bed, f"hostile-deep-{i}", parent=f"hostile-deep-{i - 1}" if i else None)


def _doomed() -> JsonObject:
    """An elastic job of one 9-GPU worker: only ``hostile-doomed`` (10 GPUs) can hold it, then it dies.

    Its operator re-creates the worker, which then waits for good; sizing keeps its minimum (9 GPUs)
    out of what the other elastic jobs grow into, and they still have room to reach their maximum.
    """
    return elastic_mpijob("hostile-doomed", workers=1, gpus_per_worker=9, max_workers="1", min_available=2)


def _make_storm(bed: Testbed) -> dict[str, str]:
    """Create every hostile object (see the module docstring); return the API server's refusals."""
    http = bed.http
    # A node and a queue phalanx sees, deleted once the hostile nodes are there.
    bed.add_nodes([SimNodeSpec("hostile-gone", labels=dict(MARK))])
    _queue(bed, "hostile-gone")
    wait_for("node seen", lambda: _seen(bed, "phalanx_node_gpus", node="hostile-gone"), timeout=60)
    wait_for("queue seen", lambda: _seen(bed, "phalanx_queue_gpus", queue="hostile-gone"), timeout=60)
    _absurd_node(bed, "hostile-huge", "9999999999999999999Ei")
    _absurd_node(bed, "hostile-wide", "4000000")
    with ThreadPoolExecutor(8) as pool:  # a chain 1,100 deep, created in any order
        list(pool.map(lambda i: _deep_queue(bed, i), range(DEEP)))
    _queue(bed, "hostile-orphan", parent="hostile-nowhere")
    _queue(bed, "hostile-orphan-kid", parent="hostile-orphan")
    _queue(bed, "hostile-cycle-a", parent="hostile-cycle-b")
    _queue(bed, "hostile-cycle-b", parent="hostile-cycle-a")
    _queue(bed, "hostile-org", quota=8)
    _queue(bed, "hostile-team-a", quota=8, parent="hostile-org")
    _queue(bed, "hostile-team-b", quota=4, parent="hostile-org")  # does not fit beside team-a
    http.request("DELETE", "/api/v1/nodes/hostile-gone")
    http.request("DELETE", f"{QUEUES}/hostile-gone")
    absurd = {"resources": {"nvidia.com/gpu": {"quota": "9999999999999999999Ei"}}}
    refused = {
        "absurd quota": _refused(bed, "hostile-absurd", absurd),
        "child of default": _refused(bed, "hostile-under-default", {"parent": "default"}),
    }
    group = podgroup("hostile-plan", 2)
    group["metadata"]["annotations"] = {"phalanx.io/gang-plan": "[" * 200_000}
    create_podgroup(http, NS, group)
    for name, queue_name in (("hostile-in-team-b", "hostile-team-b"), ("hostile-in-deep", LAST)):
        pod = gpu_pod(name, 1)
        pod["metadata"]["labels"] = {"phalanx.io/queue": queue_name}
        create_pod(http, NS, pod)
    bed.add_nodes([SimNodeSpec("hostile-doomed", gpus=10, labels=dict(MARK))])
    create_mpijob(http, NS, _doomed())
    on_doomed = partial(_workers, bed, "hostile-doomed", on="hostile-doomed")
    wait_for("hostile-doomed's worker running on its node", on_doomed, timeout=120)
    http.request("DELETE", "/api/v1/nodes/hostile-doomed")  # the worker still bound to it
    for job in (
        _elastic("hostile-superscript", max_workers="²"),
        _elastic("hostile-digits", max_workers="9" * 5000),
        _elastic("hostile-nogpu", max_workers="100000", gpus=0),
        _with_record(_elastic("calm", max_workers="4"), "{" * 200_000),
    ):
        create_mpijob(http, NS, job)
    wait_for(f"queue {LAST} told why", lambda: _condition(bed, LAST), timeout=300, interval=1.0)
    return refused


def _clean(bed: Testbed) -> None:
    http = bed.http
    for job in ("hostile-superscript", "hostile-digits", "hostile-nogpu", "calm", "hostile-doomed", "after"):
        with contextlib.suppress(NotFoundError):
            http.request("DELETE", f"{MPIJOBS}/{job}")
    delete_pods(http, NS, timeout=120)
    http.request("DELETE", f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups")
    selector = {"labelSelector": "phalanx.io/test=hostile"}
    for path in (QUEUES, "/api/v1/nodes"):
        http.request("DELETE", path, query=selector)

        def cleaned(path: str = path) -> bool:
            return not http.request("GET", path, query=selector)["items"]

        wait_for(f"{path} cleaned", cleaned, timeout=120)
    delete_pods(http, NS, timeout=120)  # what the operator re-created meanwhile


@pytest.fixture(scope="module")
def storm(operator: Testbed) -> Iterator[Storm]:
    logs_from = _log_sizes(operator)
    ensure_namespace(operator.http, NS)
    try:
        yield Storm(operator, _make_storm(operator), logs_from)
    finally:
        _clean(operator)


def test_a_pod_and_a_gang_bind_within_seconds_with_every_hostile_object_present(storm: Storm) -> None:
    http = storm.bed.http
    assert (
        len(http.request("GET", QUEUES, query={"labelSelector": "phalanx.io/test=hostile"})["items"]) > DEEP
    )
    assert {n["metadata"]["name"] for n in http.request("GET", "/api/v1/nodes")["items"]} >= {
        "hostile-huge",
        "hostile-wide",
    }
    start = time.monotonic()
    pod = gpu_pod("calm-pod", 1)
    pod["metadata"]["labels"] = {"phalanx.io/queue": "hostile-team-a"}  # beside the queue set aside
    create_pod(http, NS, pod)
    create_podgroup(http, NS, podgroup("calm-gang", 2))
    for i in range(2):
        create_pod(http, NS, member(f"calm-gang-{i}", "calm-gang", 1))
    names = ["calm-pod", "calm-gang-0", "calm-gang-1"]

    def bound() -> dict[str, str] | None:
        pods = {p["metadata"]["name"]: p for p in list_pods(http, NS)}
        nodes = {n: pods[n]["spec"].get("nodeName") for n in names if n in pods}
        return nodes if len(nodes) == 3 and all(nodes.values()) else None

    placed = wait_for("the pod and the gang bound", bound, timeout=60)
    took = time.monotonic() - start
    print(f"\nbound {took:.1f}s after creation, beside every hostile object: {placed}")
    assert set(placed.values()) <= REAL_NODES, "never on a node phalanx refuses"


def _event(bed: Testbed, namespace: str, name: str, reason: str, text: str) -> str | None:
    for event in events_for(bed.http, namespace, name):
        if event.get("reason") == reason and text in event.get("message", ""):
            return str(event["message"])
    return None


def test_every_hostile_object_says_why(storm: Storm) -> None:
    bed = storm.bed
    for node, count in (("hostile-huge", "9223372036854775807"), ("hostile-wide", "4000000")):
        refused = partial(_event, bed, "default", node, "Refused", "more than phalanx models")
        told = wait_for(f"node {node} refused", refused, timeout=60)
        assert f"advertises {count} nvidia.com/gpu" in told, told
    expected = {
        "hostile-deep-16": "it is 17 levels deep; phalanx allows 16",
        LAST: "its ancestor hostile-deep-16 is set aside",
        "hostile-orphan": "parent hostile-nowhere does not exist",
        "hostile-orphan-kid": "its parent hostile-orphan is set aside",
        "hostile-cycle-a": "form a parent cycle",
        "hostile-cycle-b": "form a parent cycle",
        "hostile-team-b": "its nvidia.com/gpu quota 4 does not fit in its parent hostile-org's quota 8",
    }
    for name, text in expected.items():
        condition = wait_for(f"queue {name} set aside", partial(_condition, bed, name), timeout=60)
        assert (condition["status"], condition["reason"]) == ("False", "SetAside"), (name, condition)
        assert text in condition["message"], (name, condition)
    for name in ("hostile-org", "hostile-team-a", "hostile-deep-15"):
        condition = wait_for(f"queue {name} in force", partial(_condition, bed, name), timeout=60)
        assert condition["status"] == "True", (name, condition)
    assert "quota must be a non-negative quantity below 8Ei" in storm.refused_at_admission["absurd quota"]
    assert "cannot have child queues" in storm.refused_at_admission["child of default"]
    for pod, text in (("hostile-in-team-b", "hostile-team-b"), ("hostile-in-deep", "levels deep")):
        turned_down = partial(_event, bed, NS, pod, "FailedScheduling", "the queue is set aside")
        told = wait_for(f"{pod} turned down", turned_down, timeout=90)
        assert text in told, told
    for job, text in (
        ("hostile-superscript", "must be a whole number of at most 9 digits, got '²'"),
        ("hostile-digits", "(5002 characters)"),
        ("hostile-nogpu", "its workers ask for no nvidia.com/gpu"),
    ):
        told = wait_for(
            f"{job} refused", partial(_event, bed, NS, job, "InvalidElasticJob", text), timeout=60
        )
        assert len(told) < 400, told
    group = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups/hostile-plan"

    def plan_removed() -> bool:
        annotations = bed.http.request("GET", group)["metadata"].get("annotations") or {}
        return "phalanx.io/gang-plan" not in annotations

    wait_for("the unreadable gang plan removed", plan_removed, timeout=60)
    command = [sys.executable, "-m", "cli", "queues", "--kubeconfig", str(bed.kubeconfig), "-o", "json"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True, cwd=REPO)
    names = {item["name"] for item in json.loads(shown.stdout)["items"]}
    assert {"hostile-org", "hostile-team-a", "hostile-deep-15"} <= names, "every queue in force is shown"
    assert "queue hostile-team-b: its nvidia.com/gpu quota 4 does not fit" in shown.stderr


def test_elastic_jobs_are_sized_beside_hostile_ones_and_after_a_node_died_under_workers(storm: Storm) -> None:
    bed, http = storm.bed, storm.bed.http
    wait_for("calm grown to 4 workers", lambda: len(_workers(bed, "calm")) == 4, timeout=120)
    create_mpijob(http, NS, _with_record(_elastic("after", max_workers="3"), FAR_AHEAD))
    start = time.monotonic()
    wait_for("after grown to 3 workers", lambda: len(_workers(bed, "after")) == 3, timeout=120)
    print(
        f"\nan elastic job created after the node died grew to 3 workers in {time.monotonic() - start:.1f}s"
    )
    replicas = get_mpijob(http, NS, "hostile-nogpu")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert replicas == 2, "workers that ask for no GPU never grow into free GPUs"
    for job in ("calm", "after"):  # each resize wrote a readable record in place of the hostile one
        record = parse_attained(
            (get_mpijob(http, NS, job)["metadata"].get("annotations") or {}).get(ATTAINED_ANNOTATION)
        )
        assert record is not None and record.at < 1e12, (job, record)


def test_deleted_objects_leave_phalanx_caches(storm: Storm) -> None:
    bed = storm.bed
    for node in ("hostile-gone", "hostile-doomed"):
        forgotten = partial(_unseen, bed, "phalanx_node_gpus", node=node)
        wait_for(f"node {node} forgotten", forgotten, timeout=60)
    forgotten = partial(_unseen, bed, "phalanx_queue_gpus", queue="hostile-gone")
    wait_for("queue hostile-gone forgotten", forgotten, timeout=60)
    assert _seen(bed, "phalanx_queue_gpus", queue="hostile-team-a"), "the queues in force are still there"


def test_no_phalanx_process_crashed_or_failed_a_pass(storm: Storm) -> None:
    bed = storm.bed
    for name in ("extender", "placement"):
        assert bed.is_running(name), f"{name} is not running"
    with open(bed.logs / "placement.log", "rb") as log:
        log.seek(storm.logs_from.get("placement.log", 0))
        placement = log.read().decode(errors="replace")
    with open(bed.logs / "extender.log", "rb") as log:
        log.seek(storm.logs_from.get("extender.log", 0))
        extender = log.read().decode(errors="replace")
    for name, text in (("placement", placement), ("extender", extender)):
        for sign in ("Traceback", "pass failed", "crashed; listing again", "could not rebuild"):
            assert sign not in text, (
                f"{name} logged {sign!r} during the storm:\n{text[text.find(sign) - 2000 :][:4000]}"
            )
