"""The NVML reader on every shared topology (through the fake), and what it does when NVML misbehaves."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace

import pynvml
import pytest

from nodeagent.fake_nvml import FakeNvml
from nodeagent.nvml_constants import NvmlConstants as C
from nodeagent.nvml_reader import NvmlReading, NvmlTopologyReader, ReadStatus
from scheduling.topology import GpuInfo, TopologyDocument, from_json

from .imported import MATRICES, SharedMatrix, document, import_view


def read(fake: FakeNvml) -> NvmlReading:
    reading = NvmlTopologyReader(fake, log=logging.getLogger("test.nvml")).read()
    assert fake.sessions == 0, "every nvmlInit must be matched by nvmlShutdown"
    return reading


def clean(name: str) -> TopologyDocument:
    doc = read(FakeNvml(document(name))).document
    assert doc is not None
    return doc


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_reading_equals_the_import_for_what_topo_m_shows(matrix: SharedMatrix) -> None:
    imported = document(matrix.name)
    fake = FakeNvml(imported)
    reading = read(fake)
    assert reading.status is ReadStatus.COMPLETE, reading.detail
    assert reading.document is not None
    assert import_view(reading.document, imported) == imported


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_reading_has_what_topo_m_hides(matrix: SharedMatrix) -> None:
    imported = document(matrix.name)
    fake = FakeNvml(imported)
    doc = read(fake).document
    assert doc is not None
    assert doc.complete, "NVML knows every pair, also those cut off in .partial files"
    assert [gpu.uuid for gpu in doc.gpus] == [gpu.uuid for gpu in fake.node.gpus]
    assert [gpu.pci_bus_id for gpu in doc.gpus] == [gpu.bus.canonical for gpu in fake.node.gpus]
    for link in doc.links:
        assert link.pcie == fake.pcie_level(link.a, link.b), f"GPU{link.a}-GPU{link.b}"
    assert doc.to_json() == from_json(doc.to_json()).to_json()


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_reading_a_fake_of_a_reading_gives_the_same_document(matrix: SharedMatrix) -> None:
    first = clean(matrix.name)
    assert read(FakeNvml(first)).document == first


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
@pytest.mark.parametrize(
    "code", [C.NVML_ERROR_FUNCTION_NOT_FOUND, C.NVML_ERROR_NOT_SUPPORTED], ids=["old-driver", "unsupported"]
)
def test_nvswitch_is_found_by_bus_id_without_the_remote_type_call(matrix: SharedMatrix, code: int) -> None:
    fake = FakeNvml(document(matrix.name), errors={"nvmlDeviceGetNvLinkRemoteDeviceType": code})
    assert read(fake).document == clean(matrix.name)


@dataclass(frozen=True)
class LostCase:
    id: str
    matrix: str
    gpu: int
    call: str
    errors: dict[str, int] = field(default_factory=dict)


LOST = [
    LostCase("handle", "v100-cubemesh", 3, "nvmlDeviceGetHandleByIndex"),
    LostCase("uuid", "v100-cubemesh", 0, "nvmlDeviceGetUUID"),
    LostCase("pci-info", "a6000-8", 6, "nvmlDeviceGetPciInfo"),
    LostCase("numa", "l40s-8", 7, "nvmlDeviceGetNumaNodeId"),
    LostCase("nvlink-state", "v100-cubemesh", 5, "nvmlDeviceGetNvLinkState"),
    LostCase("nvlink-remote", "hgx-h100-partial", 2, "nvmlDeviceGetNvLinkRemotePciInfo"),
    LostCase("nvlink-version", "a30-bridged", 1, "nvmlDeviceGetNvLinkVersion"),
    LostCase("common-ancestor-first", "p4d-a100", 0, "nvmlDeviceGetTopologyCommonAncestor"),
    LostCase("common-ancestor-last", "p4d-a100", 7, "nvmlDeviceGetTopologyCommonAncestor"),
    LostCase(  # the peers' links still end at the lost GPU's bus: not a switch, just not counted
        "nvlink-no-remote-type",
        "v100-cubemesh",
        4,
        "nvmlDeviceGetNvLinkState",
        {"nvmlDeviceGetNvLinkRemoteDeviceType": C.NVML_ERROR_FUNCTION_NOT_FOUND},
    ),
]


@pytest.mark.parametrize("case", LOST, ids=lambda c: c.id)
def test_a_gpu_lost_mid_read_is_left_out_and_the_rest_published(
    case: LostCase, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml(document(case.matrix), lose_gpu={case.gpu: case.call}, errors=case.errors)
    reading = read(fake)
    assert reading.status is ReadStatus.PARTIAL
    assert reading.lost_gpus == (case.gpu,)
    doc = reading.document
    assert doc is not None
    assert doc.gpus[case.gpu] == GpuInfo(case.gpu), "a lost GPU keeps its index and nothing else"
    assert all(case.gpu not in (link.a, link.b) for link in doc.links)
    whole = clean(case.matrix)
    others = [gpu for gpu in whole.gpus if gpu.index != case.gpu]
    assert [gpu for gpu in doc.gpus if gpu.index != case.gpu] == others
    assert doc.links == tuple(link for link in whole.links if case.gpu not in (link.a, link.b))
    assert doc.nvswitch == whole.nvswitch
    assert from_json(doc.to_json()) == doc
    assert f"GPU{case.gpu}" in caplog.text and "left out" in caplog.text


def test_a_gpu_with_fewer_switch_links_bounds_its_pairs() -> None:
    whole = clean("p4d-a100")
    degraded = replace(
        whole,
        links=tuple(replace(lk, nvlinks=11) if 3 in (lk.a, lk.b) else lk for lk in whole.links),
    )
    fake = FakeNvml(degraded)
    assert [len([ln for ln in gpu.links if ln.remote]) for gpu in fake.node.gpus] == [
        12,
        12,
        12,
        11,
        12,
        12,
        12,
        12,
    ]
    assert read(fake).document == degraded


def test_every_gpu_lost_is_a_failed_read() -> None:
    fake = FakeNvml(document("a6000-3"), lose_gpu=dict.fromkeys(range(3), "nvmlDeviceGetPciInfo"))
    reading = read(fake)
    assert (reading.status, reading.document, reading.lost_gpus) == (ReadStatus.FAILED, None, (0, 1, 2))


@dataclass(frozen=True)
class Unavailable:
    id: str
    fake: FakeNvml
    status: ReadStatus
    log: str
    calls: dict[str, int] = field(default_factory=dict)


UNAVAILABLE = [
    Unavailable(
        "library-missing",
        FakeNvml(document("p4d-a100"), init_error=C.NVML_ERROR_LIBRARY_NOT_FOUND),
        ReadStatus.NVML_UNAVAILABLE,
        "NVML Shared Library Not Found",
        {"nvmlShutdown": 0},
    ),
    Unavailable(
        "driver-not-loaded",
        FakeNvml(document("p4d-a100"), init_error=C.NVML_ERROR_DRIVER_NOT_LOADED),
        ReadStatus.NVML_UNAVAILABLE,
        "Driver Not Loaded",
    ),
    Unavailable(
        "init-unknown-error",
        FakeNvml(document("p4d-a100"), init_error=C.NVML_ERROR_UNKNOWN),
        ReadStatus.FAILED,
        "Unknown Error",
    ),
    Unavailable("zero-gpus", FakeNvml(None), ReadStatus.NO_GPUS, "no GPU", {"nvmlShutdown": 1}),
    Unavailable(
        "count-fails",
        FakeNvml(document("l40s-8"), errors={"nvmlDeviceGetCount": C.NVML_ERROR_UNKNOWN}),
        ReadStatus.FAILED,
        "Unknown Error",
        {"nvmlShutdown": 1},
    ),
    Unavailable(
        "link-state-unknown-error",
        FakeNvml(document("a6000-8"), errors={"nvmlDeviceGetNvLinkState": C.NVML_ERROR_UNKNOWN}),
        ReadStatus.FAILED,
        "nothing published",
        {"nvmlShutdown": 1},
    ),
    Unavailable(
        "ancestor-no-permission",
        FakeNvml(
            document("a6000-8"), errors={"nvmlDeviceGetTopologyCommonAncestor": C.NVML_ERROR_NO_PERMISSION}
        ),
        ReadStatus.FAILED,
        "Insufficient Permissions",
    ),
]


@pytest.mark.parametrize("case", UNAVAILABLE, ids=lambda c: c.id)
def test_no_document_when_nvml_cannot_answer(case: Unavailable, caplog: pytest.LogCaptureFixture) -> None:
    reading = read(case.fake)
    assert (reading.status, reading.document) == (case.status, None)
    assert case.log in caplog.text
    assert case.log in reading.detail or case.status is not ReadStatus.NVML_UNAVAILABLE
    for call, count in case.calls.items():
        assert case.fake.calls[call] == count, call


def test_the_real_pynvml_without_a_driver_is_unavailable_not_an_error() -> None:
    reading = NvmlTopologyReader(pynvml).read()
    if reading.status is ReadStatus.NVML_UNAVAILABLE:
        assert reading.document is None
        assert "NVML" in reading.detail
    else:  # a machine with an NVIDIA driver: whatever it has, the reading is well-formed
        assert reading.status is not ReadStatus.FAILED, reading.detail


@pytest.mark.parametrize("matrix", ["v100-cubemesh", "p4d-a100", "a6000-8", "l40s-8"])
def test_nvlink_not_supported_reads_as_pcie_only(matrix: str) -> None:
    fake = FakeNvml(document(matrix), nvlink_unsupported=True)
    doc = read(fake).document
    assert doc is not None
    assert not doc.nvswitch
    assert doc.complete
    assert all(link.nvlinks == 0 and link.pcie == fake.pcie_level(link.a, link.b) for link in doc.links)
    assert doc.gpus == clean(matrix).gpus


@pytest.mark.parametrize(
    ("matrix", "mig"),
    [("a30-bridged", {1}), ("p4d-a100", {0, 5}), ("p4d-a100", set(range(8)))],
    ids=["bridged-pair", "nvswitch-two", "nvswitch-all"],
)
def test_mig_gpus_keep_their_place_but_get_no_nvlink_credit(
    matrix: str, mig: set[int], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    reading = read(FakeNvml(document(matrix), mig_gpus=mig))
    assert reading.status is ReadStatus.COMPLETE
    assert reading.mig_gpus == tuple(sorted(mig))
    doc, whole = reading.document, clean(matrix)
    assert doc is not None
    assert doc.gpus == whole.gpus
    for link in whole.links:
        expected = replace(link, nvlinks=0) if {link.a, link.b} & mig else link
        assert doc.link(link.a, link.b) == expected
    assert doc.nvswitch is (whole.nvswitch and len(mig) < doc.gpu_count)
    assert "MIG mode" in caplog.text


@pytest.mark.parametrize(
    ("call", "field_name"),
    [
        ("nvmlDeviceGetNumaNodeId", "numa_node"),
        ("nvmlDeviceGetCpuAffinity", "cpu_affinity"),
        ("nvmlDeviceGetUUID", "uuid"),
    ],
)
@pytest.mark.parametrize("code", [C.NVML_ERROR_NOT_SUPPORTED, C.NVML_ERROR_UNKNOWN], ids=["absent", "broken"])
def test_a_gpu_fact_nvml_cannot_give_is_left_out(call: str, field_name: str, code: int) -> None:
    if field_name == "uuid" and code == C.NVML_ERROR_UNKNOWN:
        expected = ReadStatus.FAILED  # identity is structural: no publish with a broken UUID call
    else:
        expected = ReadStatus.COMPLETE
    reading = read(FakeNvml(document("l40s-8"), errors={call: code}))
    assert reading.status is expected
    if reading.document is not None:
        assert all(getattr(gpu, field_name) is None for gpu in reading.document.gpus)
        assert reading.document.links == clean("l40s-8").links


def test_model_facts_fill_what_nvml_does_not_report() -> None:
    calls = ("nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMaxPcieLinkGeneration")
    fake = FakeNvml(document("v100-cubemesh"), errors=dict.fromkeys(calls, C.NVML_ERROR_NOT_SUPPORTED))
    assert read(fake).document == clean("v100-cubemesh")


def test_a_failing_shutdown_does_not_lose_the_reading(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml(document("a6000-3"), errors={"nvmlShutdown": C.NVML_ERROR_UNINITIALIZED})
    reading = NvmlTopologyReader(fake).read()
    assert reading.status is ReadStatus.COMPLETE
    assert "nvmlShutdown failed" in caplog.text


def test_link_slots_past_the_gpu_and_inactive_links_are_skipped() -> None:
    fake = FakeNvml(document("a6000-3"))
    read(fake)
    slots = C.NVML_NVLINK_MAX_LINKS
    assert fake.calls["nvmlDeviceGetNvLinkState"] == 3 * slots, "every slot of every GPU is asked"
    assert fake.calls["nvmlDeviceGetNvLinkRemotePciInfo"] == 8, "only GPU0's and GPU1's 4 active links"
