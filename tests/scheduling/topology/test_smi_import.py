from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.topology import (
    TopologyError,
    apply_nvlink_status,
    parse_nvlink_status,
    parse_topo_matrix,
)

from .shared_files import MATRICES, NVLINK_STATUS_FILE, TOPOLOGIES, SharedMatrix, read


def test_every_shared_file_has_an_expectation() -> None:
    assert TOPOLOGIES.is_dir(), f"{TOPOLOGIES.resolve()} must sit beside the repository checkout"
    named = {m.file for m in MATRICES} | {NVLINK_STATUS_FILE}
    on_disk = {path.name for path in TOPOLOGIES.glob("*.txt")}
    assert on_disk == named


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_imports_shared_matrix(matrix: SharedMatrix) -> None:
    doc = parse_topo_matrix(read(matrix.file), gpu_model=matrix.model)
    assert doc.gpu_count == matrix.gpus
    assert doc.complete is matrix.complete
    assert doc.nvswitch is matrix.nvswitch
    for a, b, kind in matrix.pairs:
        link = doc.link(a, b)
        assert (link.kind if link else None) == kind, f"GPU{a}-GPU{b}"
    assert tuple(gpu.numa_node for gpu in doc.gpus) == matrix.numa
    for index, cpus in matrix.cpus:
        assert doc.gpus[index].cpu_affinity == cpus
    assert doc.bridged_pairs() == matrix.bridged
    assert all(gpu.uuid is None for gpu in doc.gpus)
    assert doc.gpu_model == matrix.model


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_whitespace_style_does_not_matter(matrix: SharedMatrix) -> None:
    text = read(matrix.file)
    as_tabs = "\n".join(re.sub(r" {2,}", "\t", line) for line in text.splitlines())
    as_spaces = text.replace("\t", "   ")
    crlf = text.replace("\n", "\r\n")
    expected = parse_topo_matrix(text)
    assert parse_topo_matrix(as_tabs) == expected
    assert parse_topo_matrix(as_spaces) == expected
    assert parse_topo_matrix(crlf) == expected


def test_partial_matrix_keeps_only_shown_rows() -> None:
    doc = parse_topo_matrix(read("dgx-a100-8gpu-nv12_dcgm-issue-149.partial.txt"))
    missing = [(a, b) for a in range(8) for b in range(a + 1, 8) if doc.link(a, b) is None]
    assert missing == [(6, 7)]


def test_nvswitch_is_recognised_without_a_model() -> None:
    for file in (
        "aws-p4d.24xlarge_8x-a100-nv12_training-on-eks.txt",
        "hgx-h100-sxm-8gpu-nv18_nccl-issue-1264.partial.txt",
    ):
        assert parse_topo_matrix(read(file)).nvswitch
    assert not parse_topo_matrix(read("v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt")).nvswitch


def test_model_fills_link_facts() -> None:
    doc = parse_topo_matrix(
        read("v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt"), gpu_model="Tesla V100-SXM2-16GB"
    )
    assert (doc.compute_capability, doc.nvlink_gen, doc.nvlink_link_mbs, doc.pcie_gen) == (70, 2, 25_000, 3)
    unknown = parse_topo_matrix(
        read("v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt"), gpu_model="Mystery 9000"
    )
    assert unknown.gpu_model == "Mystery 9000"
    assert unknown.compute_capability is None


def test_nvlink_status_of_a6000_box() -> None:
    statuses = parse_nvlink_status(read(NVLINK_STATUS_FILE))
    assert [s.index for s in statuses] == list(range(8))
    assert all(s.model == "NVIDIA RTX A6000" and s.link_mbs == (14_062,) * 4 for s in statuses)
    assert statuses[0].uuid == "GPU-1b574915-9e55-3096-1fdb-d32d0754017c"
    assert statuses[7].uuid == "GPU-971d3b23-dc8f-0f96-5271-3eb4060cff19"


def test_apply_nvlink_status_fills_uuids_model_and_rate() -> None:
    doc = parse_topo_matrix(read("rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt"))
    merged = apply_nvlink_status(doc, read(NVLINK_STATUS_FILE))
    assert merged.gpus[5].uuid == "GPU-cf13b5b7-9865-4e81-e2c5-818a37ce63e8"
    assert merged.gpu_model == "NVIDIA RTX A6000"
    assert (merged.compute_capability, merged.nvlink_link_mbs, merged.pcie_gen) == (86, 14_062, 4)
    assert not merged.nvswitch
    assert merged.links == doc.links


INACTIVE = """GPU 0: NVIDIA RTX A6000 (UUID: GPU-aaaaaaaa-0000-0000-0000-000000000000)
\t Link 0: 14.062 GB/s
\t Link 1: 14.062 GB/s
\t Link 2: 14.062 GB/s
\t Link 3: 14.062 GB/s
GPU 1: NVIDIA RTX A6000 (UUID: GPU-bbbbbbbb-0000-0000-0000-000000000000)
\t Link 0: 14.062 GB/s
\t Link 1: 14.062 GB/s
\t Link 2: 14.062 GB/s
\t Link 3: 14.062 GB/s
GPU 2: NVIDIA RTX A6000 (UUID: GPU-cccccccc-0000-0000-0000-000000000000)
NVML: Unable to retrieve NVLink information as all links are inActive
"""


def test_unbridged_gpu_reads_as_no_active_links() -> None:
    doc = parse_topo_matrix(read("rtx-a6000-3gpu-one-bridge-pair_siboehm-bench.txt"))
    merged = apply_nvlink_status(doc, INACTIVE)
    assert parse_nvlink_status(INACTIVE)[2].active_links == 0
    assert [gpu.uuid is not None for gpu in merged.gpus] == [True, True, True]


def test_nvlink_status_from_another_machine_is_rejected() -> None:
    doc = parse_topo_matrix(read("a30-4gpu-nvlink-bridge-pairs_vllm-issue-29070.txt"))
    with pytest.raises(
        TopologyError, match="GPU2: the topology matrix implies 4 NVLinks but nvlink -s shows 0"
    ):
        apply_nvlink_status(doc, INACTIVE)
    with pytest.raises(TopologyError, match=r"lists GPU 3 but the topology has GPU0\.\.GPU2"):
        apply_nvlink_status(
            parse_topo_matrix(read("rtx-a6000-3gpu-one-bridge-pair_siboehm-bench.txt")),
            read(NVLINK_STATUS_FILE),
        )


HEADER = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"

BAD_MATRICES = [
    pytest.param("Legend:\n  X = Self\n", "no `nvidia-smi topo -m` header", id="no-header"),
    pytest.param(HEADER + "\n", "not followed by any GPU row", id="header-only"),
    pytest.param(
        HEADER + "GPU0\t X \tNV4\t0-7\n", "row GPU0 has 3 cells, expected 2 link labels", id="short-row"
    ),
    pytest.param(HEADER + "GPU0\tNV4\tNV4\t0-7\t0\n", "GPU0 should be X on its own column", id="no-self"),
    pytest.param(HEADER + "GPU0\t X \tX\t0-7\t0\n", "X marks a GPU's own cell", id="x-off-diagonal"),
    pytest.param(HEADER + "GPU0\t X \tNVL\t0-7\t0\n", "'NVL' is not a link kind", id="bad-label"),
    pytest.param(HEADER + "GPU0\t X \tNV0\t0-7\t0\n", "'NV0' is not a link kind", id="nv0"),
    pytest.param(
        HEADER + "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV2\t X \t0-7\t0\n",
        "line 3: GPU1-GPU0 is NV2 here but NV4 on line 2",
        id="asymmetric",
    ),
    pytest.param(HEADER + "GPU0\t X \tNV4\t0-7\t0\nGPU0\t X \tNV4\t0-7\t0\n", "second row", id="dup-row"),
    pytest.param(
        HEADER + "GPU0\t X \tNV4\tcpus\t0\n", "CPU affinity 'cpus' is not a CPU list", id="bad-cpus"
    ),
    pytest.param(
        HEADER + "GPU0\t X \tNV4\t0-7\tzero\n", "NUMA affinity 'zero' is not a NUMA node", id="bad-numa"
    ),
    pytest.param("\tGPU0\tNIC0\tGPU1\nGPU0\t X \tPIX\n", "must come first and run GPU0", id="gpu-order"),
    pytest.param("GPU0\tGPU0\nGPU0\t X \tPIX\n", "appears twice", id="dup-column"),
    pytest.param(
        "\tGPU0\tGPU1\tCPU Affinity\tPCIe Speed\n",
        "unrecognised header text 'CPU Affinity PCIe Speed'",
        id="unknown-column",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_MATRICES)
def test_rejects_malformed_matrix(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(message)):
        parse_topo_matrix(text)


def test_legacy_soc_and_multi_node_numa() -> None:
    doc = parse_topo_matrix("\tGPU0\tGPU1\tNUMA Affinity\nGPU0\t X \tSOC\t0-1\nGPU1\tSOC\t X \t1\n")
    link = doc.link(0, 1)
    assert link is not None
    assert link.kind == "SYS"
    assert [gpu.numa_node for gpu in doc.gpus] == [None, 1]


BAD_STATUS = [
    pytest.param(
        "GPU 0: A (UUID: GPU-aaaaaaaa)\n Link 0: fast\n",
        "is not an `nvidia-smi nvlink -s` line",
        id="bad-link",
    ),
    pytest.param(
        "GPU 0: A (UUID: GPU-aaaaaaaa)\nGPU 0: A (UUID: GPU-aaaaaaaa)\n", "listed twice", id="dup-gpu"
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_STATUS)
def test_rejects_malformed_nvlink_status(text: str, message: str) -> None:
    with pytest.raises(TopologyError, match=re.escape(message)):
        parse_nvlink_status(text)


@given(st.text(alphabet=st.sampled_from(list("GPU0123 \tX\nNV4SYSNODEPIXBH-,AfinityCN/")), max_size=300))
def test_any_text_parses_or_raises_topology_error(text: str) -> None:
    try:
        doc = parse_topo_matrix(text)
    except TopologyError:
        return
    assert doc.gpu_count >= 1


@given(st.text(max_size=200))
def test_any_status_text_parses_or_raises_topology_error(text: str) -> None:
    with contextlib.suppress(TopologyError):
        parse_nvlink_status(text)
