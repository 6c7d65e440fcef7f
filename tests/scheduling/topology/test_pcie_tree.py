from __future__ import annotations

import pytest

from scheduling.topology import GpuInfo, GpuLink, PcieLevel, TopologyDocument, uniform
from scheduling.topology.pcie_tree import infer_pcie_tree

from .shared_files import document


def _groups(name: str) -> list[tuple[str, int]]:
    tree = infer_pcie_tree(document(name))
    return [(c.level.name, c.members) for c in tree.clusters]


TREES = [
    pytest.param("a6000-8", [("NODE", 0x0F), ("NODE", 0xF0), ("SYS", 0xFF)], id="a6000-two-sockets"),
    pytest.param(
        "v100-cubemesh", [("NODE", 0x0F), ("NODE", 0xF0), ("SYS", 0xFF)], id="cubemesh-by-cpu-affinity"
    ),
    pytest.param("p4d-a100", [("NODE", 0x0F), ("NODE", 0xF0), ("SYS", 0xFF)], id="nvswitch-by-numa"),
    pytest.param("g6e-l40s", [("NODE", 0x0F)], id="one-socket-root"),
    pytest.param("a6000-3", [("NODE", 0x07)], id="three-gpus-one-socket"),
    pytest.param(
        "rtx4090-all-sys",
        [("NODE", 1 << g) for g in range(8)] + [("SYS", 0xFF)],
        id="all-sys-trusts-the-matrix",
    ),
]


@pytest.mark.parametrize(("name", "expected"), TREES)
def test_shared_trees(name: str, expected: list[tuple[str, int]]) -> None:
    assert _groups(name) == expected


def test_pcie_switch_levels_nest() -> None:
    # Two PCIe switches of two GPUs under one host bridge, and a second socket: PIX ⊂ PXB ⊂ SYS.
    levels = {(0, 1): "PIX", (2, 3): "PIX", (0, 2): "PXB", (0, 3): "PXB", (1, 2): "PXB", (1, 3): "PXB"}
    links = []
    for a in range(5):
        for b in range(a + 1, 5):
            links.append(GpuLink(a, b, pcie=PcieLevel[levels.get((a, b), "SYS")]))
    tree = infer_pcie_tree(TopologyDocument(gpus=tuple(GpuInfo(i) for i in range(5)), links=tuple(links)))
    # The PXB group is also its socket (deduplicated), so it hangs straight from the SYS root.
    assert [(c.level.name, c.members, c.parent) for c in tree.clusters] == [
        ("PIX", 0b00011, 2),
        ("PIX", 0b01100, 2),
        ("PXB", 0b01111, 4),
        ("NODE", 0b10000, 4),
        ("SYS", 0b11111, None),
    ]
    assert tree.gpu_parent[:4] == (0, 0, 1, 1)
    assert tree.levels[0][3] == PcieLevel.PXB
    assert tree.levels[0][4] == PcieLevel.SYS


def test_nvlink_pairs_get_levels_through_their_neighbours() -> None:
    # GPU0-GPU1 hide their PCIe level behind NV4, but both are PIX to GPU2, so they are PIX apart.
    doc = TopologyDocument(
        gpus=tuple(GpuInfo(i) for i in range(3)),
        links=(
            GpuLink(0, 1, nvlinks=4),
            GpuLink(0, 2, pcie=PcieLevel.PIX),
            GpuLink(1, 2, pcie=PcieLevel.PIX),
        ),
    )
    assert infer_pcie_tree(doc).levels[0][1] == PcieLevel.PIX


def test_no_evidence_means_separate_sockets() -> None:
    tree = infer_pcie_tree(uniform(3, "NV12"))
    assert [c.level for c in tree.clusters] == [PcieLevel.NODE] * 3 + [PcieLevel.SYS]


def test_single_gpu_has_no_tree() -> None:
    tree = infer_pcie_tree(uniform(1, "SYS"))
    assert tree.clusters == ()
    assert tree.gpu_parent == (None,)
