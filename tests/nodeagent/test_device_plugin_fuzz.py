"""Malformed gRPC requests never crash the plugin: each gets a status with a reason, and it serves on.

Two kinds of input: arbitrary bytes as the body of every method (the deserializer refuses them before any
code of ours runs), and well-formed messages with arbitrary device IDs, sizes and must-include sets (our
handlers answer or refuse with ``INVALID_ARGUMENT``; ``UNKNOWN`` would mean an exception escaped).
"""

from __future__ import annotations

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi.services import DEVICE_PLUGIN
from scheduling.devices.claims import DeviceClaim
from tests.nodeagent.plugin_fixtures import Served, served, uuid

__all__ = ["served"]

METHODS = ("GetDevicePluginOptions", "GetPreferredAllocation", "Allocate", "PreStartContainer")
REFUSALS = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL}
"""INTERNAL is gRPC's own answer to bytes that do not deserialize; INVALID_ARGUMENT is ours."""

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

device_ids = st.one_of(
    st.integers(0, 7).map(uuid),
    st.integers(0, 12).map(str),
    st.text(max_size=40),
)


def _call(served: Served, method: str, body: bytes) -> grpc.StatusCode:
    raw: grpc.UnaryUnaryMultiCallable[bytes, bytes] = served.channel.unary_unary(f"/{DEVICE_PLUGIN}/{method}")
    try:
        raw(body, timeout=5)
    except grpc.RpcError as exc:
        code: grpc.StatusCode = exc.code()
        return code
    return grpc.StatusCode.OK


def _still_serves(served: Served) -> None:
    assert served.client.get_options(timeout=5).get_preferred_allocation_available


@FUZZ
@given(method=st.sampled_from(METHODS), body=st.binary(max_size=200))
def test_arbitrary_bytes_get_a_status(served: Served, method: str, body: bytes) -> None:
    assert _call(served, method, body) in REFUSALS | {grpc.StatusCode.OK}
    _still_serves(served)


@FUZZ
@given(
    available=st.lists(device_ids, max_size=12),
    must=st.lists(device_ids, max_size=3),
    size=st.integers(-(2**31), 2**31 - 1),
    claimed=st.lists(st.integers(0, 7), max_size=8, unique=True),
)
def test_arbitrary_preference_requests_are_answered_or_refused(
    served: Served, available: list[str], must: list[str], size: int, claimed: list[int]
) -> None:
    served.world.claims = [DeviceClaim("ns/a", tuple(sorted(claimed)), (len(claimed),), 0)] if claimed else []
    request = dp.PreferredAllocationRequest(
        container_requests=[
            dp.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
            )
        ]
    )
    code = _call(served, "GetPreferredAllocation", request.SerializeToString())
    assert code in {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT}
    if code is grpc.StatusCode.OK:
        reply = served.client.get_preferred_allocation(request, timeout=5)
        (container,) = reply.container_responses
        assert set(container.deviceIDs) <= {uuid(i) for i in range(8)}
        assert len(container.deviceIDs) <= max(size, len(set(must)))
    _still_serves(served)


@FUZZ
@given(ids=st.lists(device_ids, max_size=10))
def test_arbitrary_allocations_are_answered_only_for_gpus_of_the_node(served: Served, ids: list[str]) -> None:
    request = dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)])
    code = _call(served, "Allocate", request.SerializeToString())
    known = {uuid(i) for i in range(8)} | {str(i) for i in range(8)}
    expected = grpc.StatusCode.OK if ids and set(ids) <= known else grpc.StatusCode.INVALID_ARGUMENT
    assert code is expected
    _still_serves(served)
