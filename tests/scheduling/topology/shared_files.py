"""The published ``nvidia-smi`` outputs in ``shared/topologies`` and what each one is known to show.

The expectations below were written by reading each file (and its row in the folder's README), not by
running the importer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from scheduling.topology import (
    NodeTopology,
    TopologyDocument,
    apply_nvlink_status,
    parse_topo_matrix,
    prepare_topology,
)

TOPOLOGIES = Path(__file__).resolve().parents[3] / ".." / "shared" / "topologies"


@dataclass(frozen=True)
class SharedMatrix:
    """One ``topo -m`` file and facts read from it by eye."""

    name: str
    file: str
    model: str
    gpus: int
    complete: bool
    nvswitch: bool
    pairs: tuple[tuple[int, int, str | None], ...]
    numa: tuple[int | None, ...]
    cpus: tuple[tuple[int, str | None], ...] = ()
    bridged: tuple[tuple[int, int], ...] = ()


MATRICES = (
    SharedMatrix(
        "a30-bridged",
        "a30-4gpu-nvlink-bridge-pairs_vllm-issue-29070.txt",
        "NVIDIA A30",
        4,
        complete=True,
        nvswitch=False,
        pairs=((0, 1, "NV4"), (2, 3, "NV4"), (0, 2, "SYS"), (1, 3, "SYS")),
        numa=(0, 0, 1, 1),
        cpus=((0, "0-23,48-71"), (3, "24-47,72-95")),
        bridged=((0, 1), (2, 3)),
    ),
    SharedMatrix(
        "g6e-l40s",
        "aws-g6e.12xlarge_4x-l40s-pcie-node_training-on-eks.txt",
        "NVIDIA L40S",
        4,
        complete=True,
        nvswitch=False,
        pairs=((0, 3, "NODE"), (1, 2, "NODE")),
        numa=(0, 0, 0, 0),
        cpus=((2, "0-47"),),
    ),
    SharedMatrix(
        "p4d-a100",
        "aws-p4d.24xlarge_8x-a100-nv12_training-on-eks.txt",
        "NVIDIA A100-SXM4-40GB",
        8,
        complete=True,
        nvswitch=True,
        pairs=((0, 7, "NV12"), (3, 4, "NV12")),
        numa=(0, 0, 0, 0, 1, 1, 1, 1),
        cpus=((4, "24-47,72-95"),),
    ),
    SharedMatrix(
        "dgx-a100-partial",
        "dgx-a100-8gpu-nv12_dcgm-issue-149.partial.txt",
        "NVIDIA A100-SXM4-40GB",
        8,
        complete=False,
        nvswitch=True,
        pairs=((0, 7, "NV12"), (5, 6, "NV12"), (6, 7, None)),
        numa=(3, 3, 1, 1, 7, 7, None, None),
        cpus=((4, "112-127,240-255"), (6, None)),
    ),
    SharedMatrix(
        "dgx2-v100-partial",
        "dgx2-class-16x-v100-nvswitch-nv6_nccl-tests-issue-78.partial.txt",
        "Tesla V100-SXM3-32GB",
        16,
        complete=False,
        nvswitch=True,
        pairs=((0, 15, "NV6"), (3, 4, "NV6"), (4, 5, None), (14, 15, None)),
        numa=(None,) * 16,
        cpus=((0, "0-23,48-71"), (4, None)),
    ),
    SharedMatrix(
        "hgx-h100-partial",
        "hgx-h100-sxm-8gpu-nv18_nccl-issue-1264.partial.txt",
        "NVIDIA H100 80GB HBM3",
        8,
        complete=True,
        nvswitch=True,
        pairs=((0, 1, "NV18"), (6, 7, "NV18")),
        numa=(0, 0, 0, 0, 1, 1, 1, 1),
        cpus=((7, "56-111,168-223"),),
    ),
    SharedMatrix(
        "l40s-8",
        "l40s-8gpu-pcie-node-sys_nccl-tests-issue-273.txt",
        "NVIDIA L40S",
        8,
        complete=True,
        nvswitch=False,
        pairs=((0, 3, "NODE"), (0, 4, "SYS"), (5, 7, "NODE")),
        numa=(0, 0, 0, 0, 1, 1, 1, 1),
        cpus=((4, "90-179"),),
    ),
    SharedMatrix(
        "a6000-3",
        "rtx-a6000-3gpu-one-bridge-pair_siboehm-bench.txt",
        "NVIDIA RTX A6000",
        3,
        complete=True,
        nvswitch=False,
        pairs=((0, 1, "NV4"), (0, 2, "NODE"), (1, 2, "NODE")),
        numa=(0, 0, 0),
        cpus=((2, "0-31,64-95"),),
        bridged=((0, 1),),
    ),
    SharedMatrix(
        "a6000-8",
        "rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt",
        "NVIDIA RTX A6000",
        8,
        complete=True,
        nvswitch=False,
        pairs=((0, 1, "NV4"), (6, 7, "NV4"), (0, 2, "NODE"), (0, 4, "SYS"), (5, 6, "NODE")),
        numa=(0, 0, 0, 0, 1, 1, 1, 1),
        cpus=((0, "0-63"), (7, "64-127")),
        bridged=((0, 1), (2, 3), (4, 5), (6, 7)),
    ),
    SharedMatrix(
        "rtx4090-all-sys",
        "rtx4090-8gpu-pcie-all-sys_go-gpuallocator-issue-17.txt",
        "NVIDIA GeForce RTX 4090",
        8,
        complete=True,
        nvswitch=False,
        pairs=((0, 1, "SYS"), (3, 4, "SYS"), (6, 7, "SYS")),
        numa=(0, 0, 0, 0, 1, 1, 1, 1),
        cpus=((0, "0-55,112-167"), (6, "56-111,168-223")),
    ),
    SharedMatrix(
        "v100-cubemesh",
        "v100-sxm2-8gpu-cubemesh_oneflow-dlperf-4x8v100.txt",
        "Tesla V100-SXM2-16GB",
        8,
        complete=True,
        nvswitch=False,
        pairs=((0, 1, "NV1"), (0, 3, "NV2"), (0, 4, "NV2"), (0, 5, "SYS"), (1, 5, "NV2"), (3, 7, "NV1")),
        numa=(None,) * 8,
        cpus=((0, "0-11,24-35"), (4, "12-23,36-47")),
    ),
)
"""Every ``topo -m`` file of the shared folder."""

NVLINK_STATUS_FILE = "rtx-a6000-8gpu_nvlink-s_unige-baobab-gpu048.txt"
"""The one ``nvlink -s`` file; it belongs to the ``a6000-8`` matrix."""

BY_NAME = {matrix.name: matrix for matrix in MATRICES}


def read(file: str) -> str:
    """The text of a shared file."""
    return (TOPOLOGIES / file).read_text(encoding="utf-8")


@cache
def document(name: str) -> TopologyDocument:
    """The imported document of a shared matrix, with its model (and ``nvlink -s`` for ``a6000-8``)."""
    matrix = BY_NAME[name]
    doc = parse_topo_matrix(read(matrix.file), gpu_model=matrix.model)
    if name == "a6000-8":
        doc = apply_nvlink_status(doc, read(NVLINK_STATUS_FILE))
    return doc


@cache
def topology(name: str) -> NodeTopology:
    """The prepared topology of a shared matrix."""
    return prepare_topology(document(name))
