"""The truth keeper: the kubelet's List in indices, corrections written once each, events and metrics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import grpc
import pytest

from kubeio.kubeletapi import podresources_v1_pb2 as pr
from kubeio.node_pods import NodePod
from nodeagent.gpu_devices import GpuDevice, GpuDevices
from nodeagent.kubelet_view import KubeletView, view_of
from nodeagent.node_metrics import NodeMetrics
from nodeagent.node_side import claims_of
from nodeagent.truth_keeper import TruthKeeper
from scheduling.devices.truth import Kind
from tests.builders import FakeAnnotator, FakeEvents
from tests.nodeagent.plugin_fixtures import uuid

DEVICES = GpuDevices([GpuDevice(i, uuid(i)) for i in range(8)])


def pod(
    key: str, annotated: tuple[int, ...] | None, gpus: int, *, order: int = 0, live: bool = True
) -> NodePod:
    return NodePod(
        key,
        f"uid-{key}",
        annotated,
        gpus,
        (gpus,) if gpus else (),
        MappingProxyType({"main": gpus} if gpus else {}),
        live,
        order,
    )


def listed(key: str, containers: dict[str, list[str]]) -> pr.PodResources:
    namespace, name = key.split("/")
    return pr.PodResources(
        name=name,
        namespace=namespace,
        containers=[
            pr.ContainerResources(
                name=c,
                devices=[pr.ContainerDevices(resource_name="nvidia.com/gpu", device_ids=[i]) for i in ids],
            )
            for c, ids in containers.items()
        ],
    )


def reply(*pods: pr.PodResources) -> pr.ListPodResourcesResponse:
    return pr.ListPodResourcesResponse(pod_resources=list(pods))


def test_the_list_in_indices_with_the_pod_in_admission_named() -> None:
    pods = {"ns/a": pod("ns/a", (0, 1), 2), "ns/b": pod("ns/b", (2,), 1)}
    view = view_of(
        reply(listed("ns/a", {"main": [uuid(1), uuid(0)]}), listed("ns/b", {"main": []})), DEVICES, pods
    )
    assert view.pods["ns/a"].gpus == (0, 1)
    assert view.admitting == frozenset({"ns/b"})
    assert view.allocated == frozenset({"ns/a"})


def test_other_resources_and_unknown_ids_are_kept_apart() -> None:
    pods = {"ns/a": pod("ns/a", (0,), 1)}
    item = listed("ns/a", {"main": [uuid(0), "GPU-elsewhere"]})
    item.containers[0].devices.append(
        pr.ContainerDevices(resource_name="example.com/nic", device_ids=["nic0"])
    )
    view = view_of(reply(item), DEVICES, pods)
    assert view.pods["ns/a"].gpus == (0,)
    assert view.pods["ns/a"].unknown == ("GPU-elsewhere",)


@dataclass
class Kubelet:
    answer: pr.ListPodResourcesResponse
    failing: bool = False

    def read(self, pods: Mapping[str, NodePod]) -> KubeletView:
        if self.failing:
            msg = "no such socket"
            raise OSError(msg)
        return view_of(self.answer, DEVICES, pods)


def keeper(
    kubelet: Kubelet,
    pods: dict[str, NodePod],
    annotator: FakeAnnotator,
    recorder: FakeEvents,
    metrics: NodeMetrics,
) -> TruthKeeper:
    return TruthKeeper(kubelet.read, lambda: pods, annotator, recorder, metrics, node="n1")


def count(metrics: NodeMetrics, kind: Kind) -> float:
    return float(metrics.corrections.labels(kind.value)._value.get())


def test_a_mismatch_is_written_once_with_a_warning_and_a_metric() -> None:
    pods = {"ns/a": pod("ns/a", (0, 1), 2)}
    annotator, recorder, metrics = FakeAnnotator(), FakeEvents(), NodeMetrics()
    truth = keeper(
        Kubelet(reply(listed("ns/a", {"main": [uuid(4), uuid(5)]}))), pods, annotator, recorder, metrics
    )
    truth.run_once()
    truth.run_once()  # the watch has not brought the new annotation yet: not written again
    assert annotator.writes == [("ns", "a", "uid-ns/a", "phalanx.io/gpus", "4,5")]
    assert [(n, t, r) for _, n, t, r, _ in recorder.events] == [("a", "Warning", "GPUsCorrected")]
    assert count(metrics, Kind.MISMATCH) == 1
    assert dict(truth.held()) == {"ns/a": (4, 5)}


def test_a_gpu_pod_phalanx_did_not_place_gets_its_indices_recorded() -> None:
    pods = {"other/x": pod("other/x", None, 1)}
    annotator, recorder, metrics = FakeAnnotator(), FakeEvents(), NodeMetrics()
    keeper(
        Kubelet(reply(listed("other/x", {"main": [uuid(6)]}))), pods, annotator, recorder, metrics
    ).run_once()
    assert annotator.writes == [("other", "x", "uid-other/x", "phalanx.io/gpus", "6")]
    assert [(t, r) for _, _, t, r, _ in recorder.events] == [("Normal", "GPUsRecorded")]
    assert count(metrics, Kind.UNANNOTATED) == 1


def test_a_refused_write_is_tried_again_next_cycle() -> None:
    pods = {"ns/a": pod("ns/a", (0,), 1)}
    annotator, recorder, metrics = FakeAnnotator(fail=True), FakeEvents(), NodeMetrics()
    truth = keeper(Kubelet(reply(listed("ns/a", {"main": [uuid(3)]}))), pods, annotator, recorder, metrics)
    truth.run_once()
    annotator.fail = False
    truth.run_once()
    assert annotator.writes == [("ns", "a", "uid-ns/a", "phalanx.io/gpus", "3")]
    assert count(metrics, Kind.MISMATCH) == 1


def test_a_kubelet_that_cannot_be_read_changes_nothing() -> None:
    annotator = FakeAnnotator()
    truth = keeper(Kubelet(reply(), failing=True), {}, annotator, FakeEvents(), NodeMetrics())
    assert truth.run_once() is None
    assert truth.admitting() is None
    assert annotator.writes == []


@pytest.mark.parametrize("error", [OSError("gone"), grpc.RpcError()], ids=["os", "grpc"])
def test_read_failures_of_both_kinds_are_absorbed(error: Exception) -> None:
    def read(pods: Mapping[str, NodePod]) -> KubeletView:
        raise error

    truth = TruthKeeper(read, dict, FakeAnnotator(), FakeEvents(), NodeMetrics(), node="n1")
    assert truth.run_once() is None


def test_claims_leave_out_pods_done_with_allocation_and_pods_without_gpus() -> None:
    pods = {
        "ns/done": pod("ns/done", (0,), 1, order=0),
        "ns/next": pod("ns/next", (1, 2), 2, order=1),
        "ns/cpu": pod("ns/cpu", None, 0, order=2),
        "ns/odd": pod("ns/odd", (3,), 2, order=3),  # the annotation does not cover the request
        "ns/over": pod("ns/over", (4,), 1, order=4, live=False),
    }
    view = view_of(reply(listed("ns/done", {"main": [uuid(0)]})), DEVICES, pods)
    claims = {c.pod: c.gpus for c in claims_of(pods, view)}
    assert claims == {"ns/next": (1, 2), "ns/odd": ()}
