"""The GPUs phalanx chooses are the GPUs the container gets, proven against the kubelet's own device manager.

Six simulated 8-GPU NVLink nodes (the DGX-1 V100 cube-mesh) each run the kubelet v1.36.3 device manager
(``hack/devicemanager``) and the node agent as in production (``hack/bed_devices.py``). What a container
got is read from the pod status the device manager reports (``allocatedResourcesStatus``), independently
of the node agent (``hack/node_side.py``'s observer). The nodes are tainted, so the session's other tests
never land on them, and removed at the end of the module.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from bed_devices import DeviceBed
from localbed import Testbed
from node_side import (
    DEVICE_KEY,
    Observer,
    burst,
    corrected_pods,
    device_pod,
    figures,
    settled,
    uuid_indices,
)
from workload import create_pod, events_for, get_pod, list_pods, wait_for, wait_pod

from kubeio.http import JsonObject, KubeHttp
from scheduling.model import GPUS_ANNOTATION, UNHEALTHY_GPUS_ANNOTATION
from testbed.nodes import SimNodeSpec
from tests.conftest import REPO

CUBE_MESH = REPO / "hack" / "topologies" / "v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt"
BURST_NODES = [f"dev-node-{i}" for i in range(1, 5)]
HEALTH_NODE = "dev-health"
BLIND_NODE = "dev-blind"


@pytest.fixture(scope="module")
def devices(testbed: Testbed) -> Iterator[DeviceBed]:
    """Four burst nodes, one for GPU health, one whose plugin is swapped for a blind one."""
    bed = DeviceBed(testbed, CUBE_MESH)
    specs = [SimNodeSpec(n, gpus=8, labels={DEVICE_KEY: "burst"}) for n in BURST_NODES]
    specs += [SimNodeSpec(n, gpus=8, labels={DEVICE_KEY: "solo"}) for n in (HEALTH_NODE, BLIND_NODE)]
    try:
        bed.add(specs, plugin=True, taint=DEVICE_KEY)
        yield bed
    finally:
        bed.remove([s.name for s in specs])


def _report(title: str, lines: list[str]) -> None:
    print(f"\n{title}")
    for line in lines:
        print(f"  {line}")


def test_a_burst_of_200_pods_gets_exactly_the_gpus_phalanx_chose(devices: DeviceBed, namespace: str) -> None:
    """1, 2, 4 and 8 GPU pods in bursts of 25: every container's devices equal ``phalanx.io/gpus``."""
    http = devices.bed.http
    started = time.monotonic()
    with Observer(http, namespace, uuid_indices(http, BURST_NODES)) as observer:
        burst(http, namespace, pods=200, per_burst=25, gap=3.0)
        wait_for("every pod to finish", lambda: settled(http, namespace), timeout=900, interval=2.0)
    result = figures(observer, time.monotonic() - started, corrected_pods(http, namespace))
    _report("200-pod burst on 4 x 8-GPU NVLink nodes, phalanx's device plugin:", result.lines())
    assert result.pods == 200
    assert result.ran == 200, "a pod was rejected at admission with the plugin serving"
    assert result.mismatches == 0, [t for t in observer.traces.values() if t.mismatched]
    assert result.held_twice == 0, observer.held_twice
    assert not observer.unknown_devices


def test_restarting_the_agent_and_its_plugin_mid_burst_gives_no_pod_a_wrong_set(
    devices: DeviceBed, namespace: str
) -> None:
    """The plugin re-registers; pods the kubelet admits meanwhile are rejected, never given other GPUs."""
    http = devices.bed.http
    restarted = BURST_NODES[:2]
    started = time.monotonic()
    with Observer(http, namespace, uuid_indices(http, BURST_NODES)) as observer:
        burst(http, namespace, pods=40, per_burst=20, gap=1.0, sizes=((1, 2), (2, 2), (4, 1)))
        wait_for("pods running", lambda: sum(t.devices is not None for t in observer.traces.values()) >= 8)
        for node in restarted:
            devices.kill_agent(node, signal.SIGKILL)
        for node in restarted:
            devices.start_agent(node)
        restart = time.monotonic()
        burst(
            http,
            namespace,
            pods=40,
            per_burst=20,
            gap=1.0,
            sizes=((1, 2), (2, 2), (4, 1)),
            seed=26,
            prefix="c",
        )
        for node in restarted:
            devices.wait_allocatable(node, 8)
        wait_for("every pod to finish", lambda: settled(http, namespace), timeout=600, interval=2.0)
    result = figures(observer, time.monotonic() - started, corrected_pods(http, namespace))
    _report(f"agent and plugin of {restarted} killed and restarted mid-burst:", result.lines())
    assert result.mismatches == 0, [t for t in observer.traces.values() if t.mismatched]
    assert result.held_twice == 0, observer.held_twice
    rejected = [t for t in observer.traces.values() if t.phase == "Failed"]
    assert all(t.reason == "UnexpectedAdmissionError" and t.devices is None for t in rejected), rejected
    assert result.ran + result.rejected == result.pods
    after = [t for t in observer.traces.values() if t.node in restarted and (t.running_at or 0) > restart]
    assert after, "no pod was admitted on a restarted node after its plugin registered again"


def test_a_gpu_nvml_marks_unhealthy_is_not_chosen_again_and_its_pod_hears_of_it(
    devices: DeviceBed, namespace: str
) -> None:
    http = devices.bed.http
    create_pod(http, namespace, device_pod("holder", 2, node=HEALTH_NODE))
    holder = wait_pod(http, namespace, "holder", "running", lambda p: p["status"].get("phase") == "Running")
    failing = _gpus(holder)[0]
    devices.inject_xid(HEALTH_NODE, failing, 79)  # 79: GPU has fallen off the bus
    wait_for(
        "the node to name the unhealthy GPU",
        lambda: (
            (http.request("GET", f"/api/v1/nodes/{HEALTH_NODE}")["metadata"].get("annotations") or {}).get(
                UNHEALTHY_GPUS_ANNOTATION
            )
            == str(failing)
        ),
    )
    devices.wait_allocatable(HEALTH_NODE, 7)
    event = wait_for(
        "a GPUUnhealthy event on the pod holding it",
        lambda: [e for e in events_for(http, namespace, "holder") if e["reason"] == "GPUUnhealthy"],
    )
    assert f"GPU {failing}" in event[0]["message"]
    assert "Xid 79" in event[0]["message"]
    # Allocatable is 7 and the holder requests 2 (one of them the failed GPU): room for 5, as
    # kube-scheduler counts it too.
    for i in range(5):
        create_pod(http, namespace, device_pod(f"after-{i}", 1, node=HEALTH_NODE))
    pods = wait_for("five more pods running", lambda: _running(http, namespace, 6), timeout=120)
    chosen = [gpu for p in pods if p["metadata"]["name"] != "holder" for gpu in _gpus(p)]
    devices_given = [gpu for p in pods if p["metadata"]["name"] != "holder" for gpu in _devices(p)]
    assert failing not in chosen
    assert len(devices_given) == 5
    create_pod(http, namespace, device_pod("no-room", 1, node=HEALTH_NODE))
    wait_for(
        "no-room turned down",
        lambda: [e for e in events_for(http, namespace, "no-room") if e["reason"] == "FailedScheduling"],
    )
    assert get_pod(http, namespace, "no-room")["spec"].get("nodeName") is None


def _running(http: KubeHttp, namespace: str, count: int) -> list[JsonObject] | None:
    pods = list_pods(http, namespace)
    return pods if sum((p.get("status") or {}).get("phase") == "Running" for p in pods) == count else None


def _gpus(pod: JsonObject) -> list[int]:
    return [int(i) for i in pod["metadata"]["annotations"][GPUS_ANNOTATION].split(",")]


def _devices(pod: JsonObject) -> list[str]:
    return [
        r["resourceID"]
        for c in pod["status"].get("containerStatuses") or []
        for s in c.get("allocatedResourcesStatus") or []
        for r in s.get("resources") or []
    ]


def test_a_topology_blind_plugin_is_caught_and_phalanx_then_chooses_from_the_true_free_set(
    devices: DeviceBed, namespace: str
) -> None:
    """NVIDIA's-plugin mode: the kubelet picks any GPUs; the agent corrects the annotations within seconds."""
    http = devices.bed.http
    devices.swap_for_blind_plugin(BLIND_NODE)
    started = time.monotonic()
    with Observer(http, namespace, uuid_indices(http, [BLIND_NODE])) as observer:
        for i in range(5):
            create_pod(http, namespace, device_pod(f"blind-{i}", 1, node=BLIND_NODE))
        wait_for(
            "five pods whose annotation follows their devices", lambda: _agreed(observer, 5), timeout=120
        )
        create_pod(http, namespace, device_pod("next", 2, node=BLIND_NODE))
        wait_for("the next pod running", lambda: _agreed(observer, 6), timeout=120)
    result = figures(observer, time.monotonic() - started, corrected_pods(http, namespace))
    _report("topology-blind plugin on one node (mode observe):", result.lines())
    held = {t.name: set(t.devices or ()) for t in observer.traces.values() if t.name != "next"}
    chosen_for_next = set(observer.traces["next"].first_annotation or ())
    assert result.mismatches > 0, "a blind plugin should have given some pod other GPUs than phalanx chose"
    assert len(result.detection_seconds) >= 1
    assert chosen_for_next and not chosen_for_next & set().union(*held.values()), (chosen_for_next, held)
    assert result.held_twice == 0, observer.held_twice
    for name, message in corrected_pods(http, namespace).items():
        assert message.startswith("phalanx chose GPUs"), (name, message)


def _agreed(observer: Observer, count: int) -> bool:
    traces = [t for t in observer.traces.values() if t.devices is not None and t.agreed_at is not None]
    return len(traces) >= count


def test_a_gpu_pod_another_scheduler_placed_is_recorded_and_phalanx_places_around_it(
    devices: DeviceBed, namespace: str
) -> None:
    """A pod bound without phalanx gets its real indices written on it; phalanx's next choices avoid them."""
    http = devices.bed.http
    node = BURST_NODES[2]
    foreign = device_pod("foreign", 1, node=node)
    foreign["spec"].pop("nodeSelector")
    foreign["spec"].update({"schedulerName": "default-scheduler", "nodeName": node})
    with Observer(http, namespace, uuid_indices(http, [node])) as observer:
        create_pod(http, namespace, foreign)
        wait_for("the foreign pod's GPU recorded on it", lambda: _agreed(observer, 1))
        held = set(observer.traces["foreign"].devices or ())
        for i in range(7):
            create_pod(http, namespace, device_pod(f"ours-{i}", 1, node=node))
        wait_for("seven pods of phalanx running", lambda: _agreed(observer, 8), timeout=120)
    assert [e["reason"] for e in events_for(http, namespace, "foreign")].count("GPUsRecorded") == 1
    chosen = {t.name: set(t.first_annotation or ()) for t in observer.traces.values() if t.name != "foreign"}
    assert all(gpus and not gpus & held for gpus in chosen.values()), (held, chosen)
    assert corrected_pods(http, namespace) == {}
