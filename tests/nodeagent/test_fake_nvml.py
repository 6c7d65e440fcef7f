"""The fake answers like pynvml: same names, values and errors, and consistently with its document."""

from __future__ import annotations

import inspect
from typing import Any

import pynvml
import pytest

from nodeagent.fake_nvml import FakeHandle, FakeNvml, FakeNvmlError, FakePciInfo, nvml_error
from nodeagent.nvml_api import NvmlModule
from nodeagent.nvml_constants import ERROR_CLASS_NAMES, ERROR_NAMES, NvmlConstants
from nodeagent.nvml_values import parse_bus_id
from scheduling.topology import PcieLevel

from .imported import MATRICES, SharedMatrix, document

C = NvmlConstants


def protocol_members() -> list[str]:
    names = set(NvmlModule.__annotations__)
    names |= {name for name, _ in inspect.getmembers(NvmlModule) if name.startswith("nvml")}
    return sorted(names)


@pytest.mark.parametrize("name", protocol_members())
def test_every_name_the_reader_uses_exists_in_pynvml(name: str) -> None:
    assert hasattr(pynvml, name), f"pynvml has no {name}: the reader would fail on a real node"


@pytest.mark.parametrize("name", [n for n in vars(NvmlConstants) if n.startswith("NVML_")])
def test_constants_equal_pynvml(name: str) -> None:
    assert getattr(NvmlConstants, name) == getattr(pynvml, name)


@pytest.mark.parametrize("code", sorted(ERROR_CLASS_NAMES))
def test_errors_look_like_pynvml(code: int) -> None:
    real: Any = pynvml.NVMLError(code)
    fake = nvml_error(code)
    assert type(fake).__name__ == type(real).__name__
    assert fake.value == real.value == code
    assert str(fake) == ERROR_NAMES[code] == str(real)


def test_pynvml_binds_the_v2_remote_pci_symbol_under_the_plain_name() -> None:
    source = inspect.getsource(pynvml.nvmlDeviceGetNvLinkRemotePciInfo)
    assert "nvmlDeviceGetNvLinkRemotePciInfo_v2" in source
    assert not hasattr(pynvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2")


@pytest.fixture
def fake() -> FakeNvml:
    nvml = FakeNvml(document("v100-cubemesh"))
    nvml.nvmlInit()
    return nvml


def test_calls_before_init_are_uninitialised() -> None:
    nvml = FakeNvml(document("a6000-3"))
    with pytest.raises(FakeNvmlError) as raised:
        nvml.nvmlDeviceGetCount()
    assert raised.value.value == C.NVML_ERROR_UNINITIALIZED


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_nvlink_answers_agree_with_the_document(matrix: SharedMatrix) -> None:
    doc = document(matrix.name)
    nvml = FakeNvml(doc)
    nvml.nvmlInit()
    by_bus = {gpu.bus: gpu.index for gpu in nvml.node.gpus}
    for gpu in range(doc.gpu_count):
        handle = nvml.nvmlDeviceGetHandleByIndex(gpu)
        to_gpu: dict[int, int] = {}
        to_switch = 0
        absent: set[int] = set()
        for link in range(C.NVML_NVLINK_MAX_LINKS):
            try:
                state = nvml.nvmlDeviceGetNvLinkState(handle, link)
            except FakeNvmlError as exc:
                absent.add(exc.value)
                continue
            if state != C.NVML_FEATURE_ENABLED:
                continue
            remote_info = nvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link)
            assert isinstance(remote_info, FakePciInfo)
            assert remote_info.busId == remote_info.busId.lower(), "remote ids come in the short form"
            remote = parse_bus_id(remote_info.busId)
            kind = nvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)
            if kind == C.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                assert remote in nvml.node.switches
                to_switch += 1
            else:
                assert kind == C.NVML_NVLINK_DEVICE_TYPE_GPU
                assert remote is not None
                to_gpu[by_bus[remote]] = to_gpu.get(by_bus[remote], 0) + 1
        assert absent <= {C.NVML_ERROR_NOT_SUPPORTED, C.NVML_ERROR_INVALID_ARGUMENT}
        if doc.nvswitch:
            assert (to_switch, to_gpu) == (doc.nvlink_count(gpu), {})
        else:
            expected = {}
            for peer in range(doc.gpu_count):
                pair = doc.link(gpu, peer) if peer != gpu else None
                if pair is not None and pair.nvlinks:
                    expected[peer] = pair.nvlinks
            assert (to_switch, to_gpu) == (0, expected)


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_common_ancestor_is_the_document_level_where_it_shows_one(matrix: SharedMatrix) -> None:
    doc = document(matrix.name)
    nvml = FakeNvml(doc)
    nvml.nvmlInit()
    values = {
        PcieLevel.PIX: C.NVML_TOPOLOGY_SINGLE,
        PcieLevel.PXB: C.NVML_TOPOLOGY_MULTIPLE,
        PcieLevel.PHB: C.NVML_TOPOLOGY_HOSTBRIDGE,
        PcieLevel.NODE: C.NVML_TOPOLOGY_NODE,
        PcieLevel.SYS: C.NVML_TOPOLOGY_SYSTEM,
    }
    for a in range(doc.gpu_count):
        for b in range(a + 1, doc.gpu_count):
            link = doc.link(a, b)
            value = nvml.nvmlDeviceGetTopologyCommonAncestor(FakeHandle(b), FakeHandle(a))
            assert value == values[nvml.pcie_level(a, b)]
            if link is not None and link.pcie is not None:
                assert nvml.pcie_level(a, b) is link.pcie
                assert (a, b) not in nvml.node.guessed
            else:
                assert (a, b) in nvml.node.guessed


def test_guessed_levels_follow_locality() -> None:
    nvml = FakeNvml(document("v100-cubemesh"))  # no NUMA column: locality is the CPU affinity
    assert nvml.pcie_level(0, 3) is PcieLevel.NODE  # NV2, same socket
    assert nvml.pcie_level(0, 4) is PcieLevel.SYS  # NV2 across sockets


def test_identity_answers(fake: FakeNvml) -> None:
    handle = fake.nvmlDeviceGetHandleByIndex(2)
    info = fake.nvmlDeviceGetPciInfo(handle)
    assert isinstance(info, FakePciInfo)
    assert info.busId == "00000000:16:00.0"
    assert info.busIdLegacy == "0000:16:00.0"
    assert fake.nvmlDeviceGetUUID(handle).startswith("GPU-")
    assert fake.nvmlDeviceGetName(handle) == "Tesla V100-SXM2-16GB"
    assert fake.nvmlDeviceGetCudaComputeCapability(handle) == (7, 0)
    cpus_0_11_and_24_35 = (1 << 12) - 1 | ((1 << 12) - 1) << 24
    assert fake.nvmlDeviceGetCpuAffinity(handle, 1) == [cpus_0_11_and_24_35]
    assert fake.nvmlDeviceGetNvLinkVersion(handle, 0) == C.NVML_NVLINK_VERSION_2_0
    with pytest.raises(FakeNvmlError) as raised:
        fake.nvmlDeviceGetNumaNodeId(handle)  # topo -m printed no NUMA column
    assert raised.value.value == C.NVML_ERROR_NOT_SUPPORTED


@pytest.mark.parametrize(
    ("link", "code"),
    [
        (6, C.NVML_ERROR_INVALID_ARGUMENT),
        (35, C.NVML_ERROR_INVALID_ARGUMENT),
        (-1, C.NVML_ERROR_INVALID_ARGUMENT),
    ],
)
def test_link_slots_past_the_gpu_are_invalid(fake: FakeNvml, link: int, code: int) -> None:
    with pytest.raises(FakeNvmlError) as raised:
        fake.nvmlDeviceGetNvLinkState(FakeHandle(0), link)
    assert raised.value.value == code


def test_a_pcie_gpu_has_no_nvlink() -> None:
    nvml = FakeNvml(document("l40s-8"))
    nvml.nvmlInit()
    with pytest.raises(FakeNvmlError) as raised:
        nvml.nvmlDeviceGetNvLinkState(FakeHandle(0), 0)
    assert raised.value.value == C.NVML_ERROR_NOT_SUPPORTED


def test_an_unbridged_a6000_has_inactive_links() -> None:
    nvml = FakeNvml(document("a6000-3"))
    nvml.nvmlInit()
    states = [nvml.nvmlDeviceGetNvLinkState(FakeHandle(2), link) for link in range(4)]
    assert states == [C.NVML_FEATURE_DISABLED] * 4


def test_a_lost_gpu_stays_lost(fake: FakeNvml) -> None:
    nvml = FakeNvml(document("a6000-3"), lose_gpu={1: "nvmlDeviceGetUUID"})
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(1)
    nvml.nvmlDeviceGetPciInfo(handle)
    for _ in range(2):
        with pytest.raises(FakeNvmlError) as raised:
            nvml.nvmlDeviceGetUUID(handle)
        assert type(raised.value).__name__ == "NVMLError_GpuIsLost"
    with pytest.raises(FakeNvmlError):
        nvml.nvmlDeviceGetPciInfo(handle)
    assert nvml.lost == {1}
    nvml.nvmlDeviceGetPciInfo(nvml.nvmlDeviceGetHandleByIndex(0))


def test_mig_mode_and_session_count() -> None:
    nvml = FakeNvml(document("p4d-a100"), mig_gpus=[3])
    nvml.nvmlInit()
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetMigMode(FakeHandle(3)) == [C.NVML_DEVICE_MIG_ENABLE] * 2
    assert nvml.nvmlDeviceGetMigMode(FakeHandle(2)) == [C.NVML_DEVICE_MIG_DISABLE] * 2
    nvml.nvmlShutdown()
    assert nvml.sessions == 1


def test_too_many_links_for_nvml_is_refused() -> None:
    from scheduling.topology import uniform

    with pytest.raises(ValueError, match="36 slots"):
        FakeNvml(uniform(2, "NV37"))
