from __future__ import annotations

import contextlib
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.topology import (
    FORMAT_VERSION,
    TOPOLOGY_ANNOTATION,
    GpuInfo,
    GpuLink,
    PcieLevel,
    TopologyDocument,
    TopologyError,
    from_json,
)
from scheduling.topology.document import MAX_JSON_CHARS

from .shared_files import MATRICES, SharedMatrix, document

KINDS = ["PIX", "PXB", "PHB", "NODE", "SYS", "NV1", "NV2", "NV4", "NV12", "NV18", "NV4/PIX", "NV2/SYS"]


@st.composite
def documents(draw: st.DrawFn) -> TopologyDocument:
    count = draw(st.integers(1, 8))
    gpus = tuple(
        GpuInfo(
            index,
            uuid=draw(st.none() | st.from_regex(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}", fullmatch=True)),
            pci_bus_id=draw(st.none() | st.from_regex(r"0000:[0-9a-f]{2}:00\.0", fullmatch=True)),
            numa_node=draw(st.none() | st.integers(0, 7)),
            cpu_affinity=draw(st.none() | st.sampled_from(["0-23,48-71", "24-47", "0"])),
        )
        for index in range(count)
    )
    links = []
    for a in range(count):
        for b in range(a + 1, count):
            kind = draw(st.none() | st.sampled_from(KINDS))
            if kind is not None:
                nv, _, pcie = kind.partition("/")
                if nv.startswith("NV"):
                    links.append(GpuLink(a, b, int(nv[2:]), PcieLevel[pcie] if pcie else None))
                else:
                    links.append(GpuLink(a, b, pcie=PcieLevel[nv]))
    return TopologyDocument(
        gpus=gpus,
        links=tuple(links),
        nvswitch=draw(st.booleans()),
        gpu_model=draw(st.none() | st.sampled_from(["NVIDIA A100-SXM4-40GB", "Mystery GPU"])),
        compute_capability=draw(st.none() | st.sampled_from([70, 80, 86, 90])),
        nvlink_gen=draw(st.none() | st.integers(1, 5)),
        nvlink_link_mbs=draw(st.none() | st.sampled_from([14_062, 25_000, 26_562])),
        pcie_gen=draw(st.none() | st.integers(3, 6)),
    )


@given(documents())
def test_json_round_trip(doc: TopologyDocument) -> None:
    text = doc.to_json()
    assert from_json(text) == doc
    assert from_json(text).to_json() == text
    body = json.loads(text)
    assert body["v"] == FORMAT_VERSION
    assert list(body) == sorted(body)
    assert " " not in text.replace("Mystery GPU", "").replace("NVIDIA A100", "")


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_shared_documents_round_trip_compactly(matrix: SharedMatrix) -> None:
    doc = document(matrix.name)
    text = doc.to_json()
    assert from_json(text) == doc
    assert len(text) < 120 * doc.gpu_count + 8 * doc.gpu_count**2


def test_json_format_is_the_documented_one() -> None:
    doc = TopologyDocument(
        gpus=(GpuInfo(0, numa_node=0, cpu_affinity="0-7"), GpuInfo(1, uuid="GPU-12345678-abcd")),
        links=(GpuLink(0, 1, nvlinks=4, pcie=PcieLevel.PIX),),
        gpu_model="NVIDIA RTX A6000",
        pcie_gen=4,
    )
    assert doc.to_json() == (
        '{"gpus":[{"cpus":"0-7","numa":0},{"uuid":"GPU-12345678-abcd"}],"links":[["NV4/PIX"]],'
        '"model":"NVIDIA RTX A6000","nvswitch":false,"pcie_gen":4,"v":1}'
    )
    assert TOPOLOGY_ANNOTATION == "phalanx.io/gpu-topology"


def test_unknown_pairs_are_null() -> None:
    doc = TopologyDocument(
        gpus=(GpuInfo(0), GpuInfo(1), GpuInfo(2)), links=(GpuLink(0, 2, pcie=PcieLevel.SYS),)
    )
    assert json.loads(doc.to_json())["links"] == [[None, "SYS"], [None]]
    assert not doc.complete


GOOD = {"v": 1, "gpus": [{}, {}], "links": [["NV4"]], "nvswitch": False}


def _with(**changes: object) -> str:
    body = dict(GOOD)
    for key, value in changes.items():
        if value is _DROP:
            body.pop(key)
        else:
            body[key] = value
    return json.dumps(body)


_DROP = object()

BAD_JSON = [
    pytest.param("", "not valid JSON", id="empty"),
    pytest.param("{", "not valid JSON", id="truncated"),
    pytest.param("[" * 100_000 + "]" * 100_000, "not valid JSON", id="deep-nesting"),
    pytest.param("[]", "must be a JSON object, got a list", id="list"),
    pytest.param(_with(v=_DROP), 'no version key "v"', id="no-version"),
    pytest.param(_with(v=2), "unsupported topology document version 2", id="v2"),
    pytest.param(_with(v="1"), "unsupported topology document version '1'", id="v-string"),
    pytest.param(_with(v=True), "unsupported topology document version True", id="v-bool"),
    pytest.param(_with(v=1.0), "unsupported topology document version 1.0", id="v-float"),
    pytest.param(_with(extra=1), "unknown keys ['extra']", id="unknown-key"),
    pytest.param(_with(nvswitch=_DROP), "lacks the keys ['nvswitch']", id="no-nvswitch"),
    pytest.param(_with(nvswitch=0), "nvswitch must be true or false, got the integer 0", id="nvswitch-int"),
    pytest.param(_with(gpus=[]), "gpus must be a list of 1..64 objects", id="no-gpus"),
    pytest.param(_with(gpus=[{}] * 65), "gpus must be a list of 1..64 objects", id="too-many-gpus"),
    pytest.param(_with(gpus=[{}, 3]), "gpus[1] must be an object, got the integer 3", id="gpu-not-object"),
    pytest.param(_with(gpus=[{}, {"id": 1}]), "gpus[1] has unknown keys ['id']", id="gpu-unknown-key"),
    pytest.param(_with(gpus=[{}, {"numa": -1}]), "GPU1 NUMA node -1 is outside 0..4095", id="numa-negative"),
    pytest.param(
        _with(gpus=[{}, {"numa": "0"}]), "gpus[1].numa must be an integer, got a string", id="numa-str"
    ),
    pytest.param(_with(gpus=[{"uuid": "1234"}, {}]), "GPU0 uuid '1234' is malformed", id="uuid"),
    pytest.param(_with(gpus=[{"bus": "07:00.0"}, {}]), "GPU0 PCI bus id '07:00.0' is malformed", id="bus"),
    pytest.param(_with(gpus=[{"cpus": "0-7;9"}, {}]), "GPU0 CPU affinity '0-7;9' is malformed", id="cpus"),
    pytest.param(_with(links=[]), "links must be a list of 1 rows for 2 GPUs", id="links-short"),
    pytest.param(
        _with(links=[["NV4", "SYS"]]), "links[0] must list GPU0's links to GPU1..GPU1", id="row-long"
    ),
    pytest.param(
        _with(links=[[4]]), "(GPU0-GPU1) must be a string or null, got the integer 4", id="cell-int"
    ),
    pytest.param(_with(links=[["X"]]), "GPU0-GPU1: 'X' is not a link kind", id="cell-x"),
    pytest.param(_with(links=[["NV4/NV2"]]), "'NV4/NV2' is not a link kind", id="cell-double-nv"),
    pytest.param(_with(links=[["NV999"]]), "NVLink count 999 is outside 0..255", id="cell-many-links"),
    pytest.param(_with(cc=8.6), "cc must be an integer, got a number", id="cc-float"),
    pytest.param(_with(pcie_gen=0), "PCIe generation 0 is outside 1..20", id="pcie-gen"),
    pytest.param(_with(model=7), "model must be a string", id="model-int"),
    pytest.param(_with(model="\n"), "GPU model '\\n' is malformed", id="model-control"),
    pytest.param(" " * (MAX_JSON_CHARS + 1), "more than the 262144 allowed", id="too-long"),
]


@pytest.mark.parametrize(("text", "message"), BAD_JSON)
def test_rejects_bad_documents(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(message)):
        from_json(text)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


@given(st.text(max_size=200))
def test_arbitrary_text_never_crashes(text: str) -> None:
    with contextlib.suppress(TopologyError):
        from_json(text)


@given(st.dictionaries(st.sampled_from([*GOOD, "cc", "model", "pcie_gen", "x"]), JSON_VALUES))
def test_arbitrary_json_objects_never_crash(body: dict[str, object]) -> None:
    with contextlib.suppress(TopologyError):
        from_json(json.dumps({**GOOD, **body}))


@given(documents(), st.data())
def test_mutated_documents_never_crash(doc: TopologyDocument, data: st.DataObject) -> None:
    text = doc.to_json()
    position = data.draw(st.integers(0, len(text) - 1))
    replacement = data.draw(st.sampled_from(['"', "1", "-", "null", "]", "{", ",", "NV", "true", ""]))
    with contextlib.suppress(TopologyError):
        from_json(text[:position] + replacement + text[position + 1 :])


def test_document_checks_its_own_shape() -> None:
    with pytest.raises(TopologyError, match="position 1 holds GPU2"):
        TopologyDocument(gpus=(GpuInfo(0), GpuInfo(2)))
    with pytest.raises(TopologyError, match="names a GPU beyond GPU1"):
        TopologyDocument(gpus=(GpuInfo(0), GpuInfo(1)), links=(GpuLink(0, 2, pcie=PcieLevel.SYS),))
    with pytest.raises(TopologyError, match="GPU0-GPU1 is misplaced"):
        TopologyDocument(
            gpus=(GpuInfo(0), GpuInfo(1)),
            links=(GpuLink(0, 1, pcie=PcieLevel.SYS), GpuLink(0, 1, pcie=PcieLevel.SYS)),
        )
    with pytest.raises(TopologyError, match="needs NVLinks, a PCIe level or both"):
        GpuLink(0, 1)
    with pytest.raises(TopologyError, match="0 <= a < b"):
        GpuLink(1, 1, pcie=PcieLevel.SYS)


def test_nvlink_count_and_bridges() -> None:
    cube = document("v100-cubemesh")
    assert [cube.nvlink_count(g) for g in range(8)] == [6] * 8
    assert cube.bridged_pairs() == ()
    switch = document("p4d-a100")
    assert switch.nvlink_count(3) == 12
    assert switch.bridged_pairs() == ()
