"""The single-pod path end to end: real kube-scheduler -> extender filter/prioritize/bind -> Binding."""

from __future__ import annotations

import random
import time
import urllib.request

import orjson
import pytest
from localbed import Testbed
from workload import (
    create_pod,
    double_booked,
    get_pod,
    gpu_pod,
    gpus_of,
    kept_gated,
    list_pods,
    live,
    running,
    wait_pod,
)

from kubeio.binding import BindRefusedError, BindStatus, PodBinder

pytestmark = pytest.mark.both_modes
"""Run with phalanx as the extender and as the framework sidecar (``tests/e2e/conftest.py``)."""


def metric(testbed: Testbed, name: str, **labels: str) -> float:
    with urllib.request.urlopen(f"{testbed.extender_url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")
    for line in text.splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    return 0.0


def post_bind(testbed: Testbed, body: dict[str, str]) -> dict[str, str]:
    request = urllib.request.Request(
        f"{testbed.extender_url}/bind", data=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        result: dict[str, str] = orjson.loads(reply.read())
        return result


@pytest.mark.extender_only("the extender's bind counter (test_sidecar.py checks the plugin's bind)")
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_gpu_pods_are_bound_by_the_extender_with_their_gpu_indices(
    testbed: Testbed, namespace: str, gpus: int
) -> None:
    bound_before = metric(testbed, "phalanx_extender_binds_total", outcome="bound")
    create_pod(testbed.http, namespace, gpu_pod("train", gpus))
    pod = wait_pod(testbed.http, namespace, "train", "running", running)
    assert pod["spec"]["nodeName"].startswith("gpu-node-")
    assert len(gpus_of(pod)) == gpus, pod["metadata"].get("annotations")
    assert set(gpus_of(pod)) <= set(range(8))
    assert metric(testbed, "phalanx_extender_binds_total", outcome="bound") == bound_before + 1


def test_no_gpu_index_is_ever_given_to_two_live_pods(testbed: Testbed, namespace: str) -> None:
    rng = random.Random(20261122)
    sizes = [rng.choice([1, 1, 2, 2, 4, 8]) for _ in range(40)]
    for i, size in enumerate(sizes):
        duration = f"{rng.uniform(0.5, 2.5):.1f}"
        create_pod(
            testbed.http,
            namespace,
            gpu_pod(f"p{i}", size, annotations={"phalanx.io/sim-duration-seconds": duration}),
        )
    conflicts: list[str] = []
    observations = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        pods = list_pods(testbed.http, namespace)
        observations += 1
        conflicts += double_booked(list_pods(testbed.http))
        if len(pods) == len(sizes) and all(p["status"].get("phase") == "Succeeded" for p in pods):
            break
        time.sleep(0.2)
    pods = list_pods(testbed.http, namespace)
    assert all(p["status"].get("phase") == "Succeeded" for p in pods), [
        (p["metadata"]["name"], p["status"].get("phase"))
        for p in pods
        if p["status"].get("phase") != "Succeeded"
    ]
    assert all(
        len(gpus_of(p)) == size
        for p, size in zip(sorted(pods, key=lambda p: int(p["metadata"]["name"][1:])), sizes, strict=True)
    )
    assert observations > 10
    assert conflicts == []


def test_a_pod_that_fits_nowhere_stays_pending_and_says_why(testbed: Testbed, namespace: str) -> None:
    """Kept gated by the release pass, which says no node can ever hold 16 GPUs; never tried, never bound."""
    create_pod(testbed.http, namespace, gpu_pod("too-big", 16))
    message = kept_gated(testbed.http, namespace, "too-big", "16 GPUs")
    print(message)
    assert message == (
        "kept gated: can never be placed on this cluster as it is: a pod needs 16 GPUs on one node; the "
        "largest of the schedulable nodes offers 8"
    )
    pod = get_pod(testbed.http, namespace, "too-big")
    assert not pod["spec"].get("nodeName")
    assert pod["status"]["phase"] == "Pending"
    assert [g["name"] for g in pod["spec"]["schedulingGates"]] == ["phalanx.io/admission"]


@pytest.mark.extender_only("the extender's /bind route")
def test_a_retried_bind_does_not_bind_twice(testbed: Testbed, namespace: str) -> None:
    create_pod(testbed.http, namespace, gpu_pod("once", 2))
    pod = wait_pod(testbed.http, namespace, "once", "bound", live)
    node, gpus = pod["spec"]["nodeName"], gpus_of(pod)
    args = {"PodName": "once", "PodNamespace": namespace, "PodUID": pod["metadata"]["uid"], "Node": node}
    before = metric(testbed, "phalanx_extender_binds_total", outcome="bound")
    assert post_bind(testbed, args) == {"Error": ""}
    other = next(n for n in ("gpu-node-1", "gpu-node-2", "gpu-node-3") if n != node)
    assert "already bound to node" in post_bind(testbed, {**args, "Node": other})["Error"]
    after = get_pod(testbed.http, namespace, "once")
    assert (after["spec"]["nodeName"], gpus_of(after)) == (node, gpus)
    assert metric(testbed, "phalanx_extender_binds_total", outcome="bound") == before
    assert metric(testbed, "phalanx_extender_binds_total", outcome="already_bound") >= 1


@pytest.mark.extender_only("kubeio's binder against the API server, in no mode")
def test_the_binding_subresource_is_idempotent_and_guarded_by_uid(testbed: Testbed, namespace: str) -> None:
    """Kubeio's binder against the real API server, including the Status reply the client cannot decode."""
    created = create_pod(testbed.http, namespace, gpu_pod("manual", 1, scheduler="nobody"))
    uid = created["metadata"]["uid"]
    binder = PodBinder(testbed.http)
    with pytest.raises(BindRefusedError):
        binder.bind(namespace, "manual", "not-the-uid", "gpu-node-1", {})
    assert binder.bind(namespace, "manual", uid, "gpu-node-1", {"phalanx.io/gpus": "7"}) is BindStatus.BOUND
    assert (
        binder.bind(namespace, "manual", uid, "gpu-node-1", {"phalanx.io/gpus": "7"})
        is BindStatus.ALREADY_BOUND
    )
    with pytest.raises(BindRefusedError, match="already"):
        binder.bind(namespace, "manual", uid, "gpu-node-2", {})
    pod = get_pod(testbed.http, namespace, "manual")
    assert (pod["spec"]["nodeName"], gpus_of(pod)) == ("gpu-node-1", (7,))


def test_one_gpu_pods_pack_onto_one_node_and_keep_the_others_whole(testbed: Testbed, namespace: str) -> None:
    for i in range(4):
        create_pod(testbed.http, namespace, gpu_pod(f"small-{i}", 1))
        wait_pod(testbed.http, namespace, f"small-{i}", "bound", live)
    nodes = {p["spec"]["nodeName"] for p in list_pods(testbed.http, namespace)}
    assert len(nodes) == 1, f"4 one-GPU pods spread over {sorted(nodes)}; 8-GPU jobs need whole nodes"
