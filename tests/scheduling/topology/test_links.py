from __future__ import annotations

import pytest

from scheduling.topology import GpuLink, PcieLevel, TopologyError, parse_link

PARSED = [
    pytest.param("NV1", 1, None, "NV1", id="nv1"),
    pytest.param("NV18", 18, None, "NV18", id="nv18"),
    pytest.param("PIX", 0, PcieLevel.PIX, "PIX", id="pix"),
    pytest.param("SYS", 0, PcieLevel.SYS, "SYS", id="sys"),
    pytest.param("NV4/PHB", 4, PcieLevel.PHB, "NV4", id="nv-with-pcie"),
]


@pytest.mark.parametrize(("text", "nvlinks", "pcie", "kind"), PARSED)
def test_parse_link(text: str, nvlinks: int, pcie: PcieLevel | None, kind: str) -> None:
    link = parse_link(2, 5, text)
    assert (link.a, link.b, link.nvlinks, link.pcie, link.kind, link.text) == (
        2,
        5,
        nvlinks,
        pcie,
        kind,
        text,
    )


@pytest.mark.parametrize(
    "text", ["X", "", "nv4", "NV", "NV04", "NV-1", "SOC", "PIX/NV4", "NV4/", "/PIX", "NV4/X"]
)
def test_rejects(text: str) -> None:
    with pytest.raises(TopologyError, match="is not a link kind"):
        parse_link(0, 1, text)


def test_levels_nest_in_nvml_order() -> None:
    assert sorted(PcieLevel, key=int) == [
        PcieLevel.PIX,
        PcieLevel.PXB,
        PcieLevel.PHB,
        PcieLevel.NODE,
        PcieLevel.SYS,
    ]
    assert GpuLink(0, 1, pcie=PcieLevel.NODE) < GpuLink(0, 2, pcie=PcieLevel.PIX)
