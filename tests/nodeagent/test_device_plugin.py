"""The plugin's gRPC handlers, called over a real Unix socket the way the kubelet calls them."""

from __future__ import annotations

import grpc
import pytest

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from scheduling.devices.claims import Basis, DeviceClaim
from tests.nodeagent.plugin_fixtures import Served, served, uuid

__all__ = ["served"]


def ask(
    size: int, available: range | list[int] = range(8), must: list[int] | None = None
) -> dp.PreferredAllocationRequest:
    request = dp.ContainerPreferredAllocationRequest(
        available_deviceIDs=[uuid(i) for i in available],
        must_include_deviceIDs=[uuid(i) for i in must or []],
        allocation_size=size,
    )
    return dp.PreferredAllocationRequest(container_requests=[request])


def preferred(reply: dp.PreferredAllocationResponse) -> list[str]:
    (container,) = reply.container_responses
    return sorted(container.deviceIDs)


def test_it_asks_the_kubelet_for_preferences_and_needs_no_pre_start(served: Served) -> None:
    options = served.client.get_options(timeout=5)
    assert options.get_preferred_allocation_available
    assert not options.pre_start_required


def test_list_and_watch_sends_every_gpu_then_again_when_one_fails(served: Served) -> None:
    stream = served.client.list_and_watch(timeout=10)
    first = next(stream)
    assert [d.ID for d in first.devices] == [uuid(i) for i in range(8)]
    assert {d.health for d in first.devices} == {"Healthy"}
    assert [n.ID for n in first.devices[5].topology.nodes] == [1]
    served.devices.mark_unhealthy(5, "critical Xid 79")
    second = next(stream)
    assert [d.ID for d in second.devices if d.health == "Unhealthy"] == [uuid(5)]
    stream.cancel()  # type: ignore[attr-defined]


def test_the_one_pod_in_admission_gets_its_own_set(served: Served) -> None:
    served.world.claims = [DeviceClaim("ns/a", (3, 6), (2,), 0)]
    assert preferred(served.client.get_preferred_allocation(ask(2), timeout=5)) == [uuid(3), uuid(6)]
    assert served.world.asked_kubelet == 0
    assert served.outcomes.preferences[0].basis is Basis.PLACED


def test_two_pods_that_could_be_in_admission_make_it_ask_the_kubelet(served: Served) -> None:
    served.world.claims = [DeviceClaim("ns/a", (0, 1), (2,), 0), DeviceClaim("ns/b", (4, 5), (2,), 1)]
    served.world.admitting = frozenset({"ns/b"})
    assert preferred(served.client.get_preferred_allocation(ask(2), timeout=5)) == [uuid(4), uuid(5)]
    assert served.world.asked_kubelet == 1
    assert served.outcomes.preferences[0].basis is Basis.KUBELET


def test_a_pod_the_watch_has_not_brought_yet_is_read_from_the_api(served: Served) -> None:
    served.world.later_claims = [DeviceClaim("ns/late", (7,), (1,), 0)]
    assert preferred(served.client.get_preferred_allocation(ask(1), timeout=5)) == [uuid(7)]
    assert served.world.refreshed == 1


def test_allocate_gives_the_container_stack_the_uuids(served: Served) -> None:
    served.world.claims = [DeviceClaim("ns/a", (2, 3), (2,), 0)]
    served.client.get_preferred_allocation(ask(2), timeout=5)
    request = dp.AllocateRequest(
        container_requests=[dp.ContainerAllocateRequest(devices_ids=[uuid(3), uuid(2)])]
    )
    reply = served.client.allocate(request, timeout=5)
    (container,) = reply.container_responses
    assert sorted(container.envs["NVIDIA_VISIBLE_DEVICES"].split(",")) == [uuid(2), uuid(3)]
    ((gpus, preference),) = served.outcomes.allocations
    assert gpus == (2, 3)
    assert preference is not None and preference.pod == "ns/a"


def test_an_allocation_of_other_gpus_than_preferred_is_reported_with_the_preference(served: Served) -> None:
    served.world.claims = [DeviceClaim("ns/a", (2, 3), (2,), 0)]
    served.client.get_preferred_allocation(ask(2), timeout=5)
    request = dp.AllocateRequest(
        container_requests=[dp.ContainerAllocateRequest(devices_ids=[uuid(0), uuid(1)])]
    )
    served.client.allocate(request, timeout=5)
    ((gpus, preference),) = served.outcomes.allocations
    assert gpus == (0, 1)
    assert preference is not None and preference.gpus == (2, 3)


@pytest.mark.parametrize(
    ("request_", "detail"),
    [
        (
            dp.AllocateRequest(
                container_requests=[dp.ContainerAllocateRequest(devices_ids=["GPU-not-here"])]
            ),
            "GPU-not-here",
        ),
        (dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest()]), "no devices"),
    ],
    ids=["unknown-device", "no-device"],
)
def test_a_malformed_allocate_is_refused_with_a_reason(
    served: Served, request_: dp.AllocateRequest, detail: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        served.client.allocate(request_, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert detail in (caught.value.details() or "")


def test_a_must_include_naming_no_gpu_of_the_node_is_refused(served: Served) -> None:
    request = dp.PreferredAllocationRequest(
        container_requests=[
            dp.ContainerPreferredAllocationRequest(must_include_deviceIDs=["GPU-x"], allocation_size=1)
        ]
    )
    with pytest.raises(grpc.RpcError) as caught:
        served.client.get_preferred_allocation(request, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
