"""kubeio.convert on real API JSON from the captured fixtures."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import yaml

from kubeio.convert import ConvertError, node_from_api, pod_from_api, pod_requests, podgroup_from_api
from scheduling.model import (
    DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Resources,
    Taint,
    Toleration,
)
from tests.conftest import SHARED

FIX = SHARED / "fixtures" / "extender"


def test_pod_from_a_captured_request() -> None:
    pod = pod_from_api(orjson.loads((FIX / "nodecache-true" / "filter.request.json").read_bytes())["Pod"])
    assert (pod.namespace, pod.name, pod.scheduler_name) == ("gpu-test-nc", "gpu-train-a", "gpu-scheduler")
    assert pod.requests == Resources(milli_cpu=4000, memory=32 * 2**30, gpus=2)
    assert pod.node_name is None
    assert pod.uid == "9f0ca183-6788-45a4-a1ce-ab371e9800eb"


def test_a_pods_nominated_node_is_read_from_its_status() -> None:
    raw = orjson.loads((FIX / "nodecache-true" / "filter.request.json").read_bytes())["Pod"]
    assert pod_from_api(raw).nominated_node is None
    raw["status"] = {**raw.get("status", {}), "nominatedNodeName": "gpu-node-2"}
    assert pod_from_api(raw).nominated_node == "gpu-node-2"


def test_bound_victims_in_a_captured_preempt_request() -> None:
    request = orjson.loads((FIX / "nodecache-false" / "preempt.request.json").read_bytes())
    victims = [pod_from_api(p) for v in request["NodeNameToVictims"].values() for p in v["Pods"]]
    assert {v.node_name for v in victims} == {"gpu-node-1", "gpu-node-2", "gpu-node-3"}
    assert all(v.requests.gpus == 8 and v.holds_resources for v in victims)


def test_node_from_a_manifest_and_status() -> None:
    raw = yaml.safe_load((FIX / "manifests" / "node-gpu-node-3.yaml").read_text())
    raw["status"] = orjson.loads((FIX / "manifests" / "node-status-patch.json").read_bytes())["status"]
    node = node_from_api(raw)
    assert node.allocatable == Resources(milli_cpu=64000, memory=512 * 2**30, gpus=8)
    assert node.ready
    assert node.labels["topology.kubernetes.io/zone"] == "zone-b"


def container(requests: dict[str, str], limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests, "limits": limits or {}}}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {"containers": [container({"cpu": "1"}), container({"cpu": "500m", "nvidia.com/gpu": "2"})]},
            Resources(1500, 0, 2),
        ),
        ({"containers": [container({}, {"nvidia.com/gpu": "4"})]}, Resources(0, 0, 4)),
        (
            {
                "initContainers": [container({"cpu": "4"})],
                "containers": [container({"cpu": "1", "nvidia.com/gpu": "1"})],
            },
            Resources(4000, 0, 1),
        ),
    ],
    ids=["containers add up", "gpu limits only", "init containers take the max"],
)
def test_effective_requests(spec: dict[str, Any], expected: Resources) -> None:
    assert pod_requests(spec) == expected


@pytest.mark.parametrize(
    "pod",
    [
        {"metadata": {"name": "p", "namespace": "n"}},
        {"metadata": {"uid": "u", "name": "p", "namespace": "n"}, "spec": {"containers": {}}},
        {"metadata": {"uid": "u", "name": "p", "namespace": "n"}, "spec": {"priority": "high"}},
        {"metadata": {"uid": "u", "name": "p", "namespace": "n", "labels": {"a": 1}}},
    ],
    ids=["no uid", "containers not a list", "priority not an int", "label not a string"],
)
def test_malformed_pods_are_rejected_with_the_field(pod: dict[str, Any]) -> None:
    with pytest.raises(ConvertError):
        pod_from_api(pod)


def _podgroup(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "g", "namespace": "ml", "uid": "u"}, "spec": spec}


@pytest.mark.parametrize(
    ("spec", "timeout"),
    [
        pytest.param({"minMember": 3}, DEFAULT_SCHEDULE_TIMEOUT_SECONDS, id="absent means the default"),
        pytest.param(
            {"minMember": 3, "scheduleTimeoutSeconds": 0},
            DEFAULT_SCHEDULE_TIMEOUT_SECONDS,
            id="0 means the default, as the MPI Operator writes it",
        ),
        pytest.param({"minMember": 3, "scheduleTimeoutSeconds": 7}, 7, id="a value is kept"),
    ],
)
def test_a_podgroups_schedule_timeout(spec: dict[str, Any], timeout: int) -> None:
    assert podgroup_from_api(_podgroup(spec)).timeout_seconds == timeout


def test_a_negative_schedule_timeout_is_refused_with_the_field() -> None:
    with pytest.raises(ConvertError, match=r"spec\.scheduleTimeoutSeconds must be an integer of at least 0"):
        podgroup_from_api(_podgroup({"minMember": 3, "scheduleTimeoutSeconds": -1}))


def test_a_pods_pins_are_the_nodes_its_hostname_tolerations_name() -> None:
    pod = {
        "metadata": {"name": "w", "namespace": "ml", "uid": "u"},
        "spec": {
            "tolerations": [
                {"key": "phalanx.io/hostname", "operator": "Equal", "value": "n7", "effect": "NoSchedule"},
                {"key": "phalanx.io/hostname", "value": "n2"},
                {"key": "phalanx.io/hostname", "operator": "Exists"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
            ]
        },
    }
    assert pod_from_api(pod).pinned == frozenset({"n7", "n2"})
    assert pod_from_api({"metadata": pod["metadata"], "spec": {}}).pinned == frozenset()


def test_a_pods_node_selector_tolerations_and_required_node_affinity() -> None:
    pod = pod_from_api(
        {
            "metadata": {"name": "p", "namespace": "ml", "uid": "u"},
            "spec": {
                "nodeSelector": {"gpu-type": "h100"},
                "tolerations": [
                    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "dedicated", "value": "ml"},
                ],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["a", "b"]}
                                    ]
                                },
                                {
                                    "matchFields": [
                                        {"key": "metadata.name", "operator": "In", "values": ["n1"]}
                                    ]
                                },
                            ]
                        },
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 1,
                                "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]},
                            }
                        ],
                    }
                },
            },
        }
    )
    assert dict(pod.node_selector) == {"gpu-type": "h100"}
    assert pod.tolerations == (
        Toleration("gpu", "Exists", "", "NoSchedule"),
        Toleration("dedicated", "Equal", "ml", ""),
    )
    assert pod.affinity == (
        NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a", "b")),)),
        NodeSelectorTerm((NodeSelectorRequirement("metadata.name", "In", ("n1",), on_name=True),)),
    )


def test_a_pod_without_constraints_has_none() -> None:
    pod = pod_from_api({"metadata": {"name": "p", "namespace": "ml", "uid": "u"}, "spec": {}})
    assert (dict(pod.node_selector), pod.tolerations, pod.affinity) == ({}, (), ())


def test_a_nodes_taints() -> None:
    node = node_from_api(
        {
            "metadata": {"name": "n1"},
            "spec": {
                "taints": [
                    {"key": "gpu", "value": "reserved", "effect": "NoSchedule"},
                    {"key": "phalanx.io/hostname", "value": "n1", "effect": "NoSchedule"},
                ]
            },
        }
    )
    assert node.taints == (
        Taint("gpu", "reserved", "NoSchedule"),
        Taint("phalanx.io/hostname", "n1", "NoSchedule"),
    )
    assert node.pin_taint


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"nodeSelector": {"gpu": 1}}, r"spec\.nodeSelector\['gpu'\] must be a string"),
        ({"tolerations": [{"key": 1}]}, r"spec\.tolerations\[0\]\.key must be a string"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "z", "operator": "In", "values": "a"}]}
                            ]
                        }
                    }
                }
            },
            r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.values must be a list",
        ),
    ],
    ids=["selector value not a string", "toleration key not a string", "affinity values not a list"],
)
def test_malformed_constraints_are_refused_with_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ConvertError, match=field):
        pod_from_api({"metadata": {"name": "p", "namespace": "ml", "uid": "u"}, "spec": spec})


def test_a_taint_without_an_effect_is_refused_with_the_field() -> None:
    with pytest.raises(ConvertError, match=r"spec\.taints\[0\]\.effect must be a non-empty string"):
        node_from_api({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "gpu"}]}})


def gated_pod(gates: object) -> dict[str, Any]:
    return {
        "metadata": {"name": "w-0", "namespace": "ml", "uid": "u-1"},
        "spec": {"schedulerName": "phalanx", "containers": [], "schedulingGates": gates},
    }


@pytest.mark.parametrize(
    ("gates", "gated"),
    [
        pytest.param([{"name": "phalanx.io/admission"}], True, id="ours"),
        pytest.param(
            [{"name": "example.com/quota"}, {"name": "phalanx.io/admission"}], True, id="ours-second"
        ),
        pytest.param([{"name": "example.com/quota"}], False, id="only-another"),
        pytest.param([], False, id="emptied"),
        pytest.param(None, False, id="absent"),
    ],
)
def test_a_pod_is_gated_while_it_carries_the_admission_gate(gates: object, gated: bool) -> None:
    assert pod_from_api(gated_pod(gates)).gated is gated


@pytest.mark.parametrize(
    ("gates", "where"),
    [
        pytest.param(
            {"name": "phalanx.io/admission"}, "spec.schedulingGates must be a list", id="not-a-list"
        ),
        pytest.param(["phalanx.io/admission"], r"spec.schedulingGates\[0\] must be an object", id="a-string"),
        pytest.param([{"name": 3}], r"spec.schedulingGates\[0\].name", id="a-number"),
    ],
)
def test_malformed_scheduling_gates_are_refused_with_the_field(gates: object, where: str) -> None:
    with pytest.raises(ConvertError, match=where):
        pod_from_api(gated_pod(gates))


@pytest.mark.parametrize(
    ("annotations", "progress"),
    [
        pytest.param(
            {"phalanx.io/throughput": '{"samplesPerSecond":9.5,"workers":2}'},
            '{"samplesPerSecond":9.5,"workers":2}',
            id="kept",
        ),
        pytest.param({}, None, id="none"),
        pytest.param({"phalanx.io/throughput": "x" * 300_000}, "x" * 4097, id="clipped"),
    ],
)
def test_a_pods_progress_report_is_kept_as_written_and_an_oversized_one_clipped(
    annotations: dict[str, str], progress: str | None
) -> None:
    raw = gated_pod(None) | {
        "metadata": {"name": "w-0", "namespace": "ml", "uid": "u-1", "annotations": annotations}
    }
    assert pod_from_api(raw).progress == progress


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}], True),
        ([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}], False),
        ([{"type": "PodScheduled", "status": "True"}], False),
        ([], False),
        ([{"type": "Ready", "status": "False", "reason": "Unschedulable"}], False),
        (["PodScheduled"], False),
    ],
    ids=["turned-down", "gated", "bound", "none", "another-condition", "not-an-object"],
)
def test_a_pod_kube_scheduler_turned_down_reads_as_unschedulable(
    conditions: list[object], expected: bool
) -> None:
    raw = {
        "metadata": {"uid": "u", "namespace": "ns", "name": "p"},
        "spec": {"containers": []},
        "status": {"conditions": conditions},
    }
    assert pod_from_api(raw).unschedulable is expected
