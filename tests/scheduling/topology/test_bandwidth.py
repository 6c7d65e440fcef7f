from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.topology import BandwidthModel, uniform


def test_bandwidth_model_choices() -> None:
    model = BandwidthModel()
    assert model.nvlink_mbs(uniform(2, "NV4")) == 20_000
    assert model.pcie_mbs(uniform(2, "PIX")) == 12_000
    measured = replace(uniform(2, "NV4"), nvlink_link_mbs=26_562)  # an H100's `nvlink -s` rate, no model
    assert model.nvlink_mbs(measured) == 26_562 * 80 // 100
    assert BandwidthModel(inter_socket=24_000).inter_socket == 24_000


PER_MODEL = [
    pytest.param("Tesla V100-SXM2-16GB", 20_000, 12_000, id="v100"),
    pytest.param("NVIDIA A30", 20_000, 24_000, id="a30"),
    pytest.param("NVIDIA RTX A6000", 12_000, 24_000, id="a6000"),
    pytest.param("NVIDIA H100 80GB HBM3", 20_600, 48_000, id="h100"),
    pytest.param("NVIDIA B200", 40_100, 48_000, id="b200"),
    pytest.param("Tesla P100-SXM2-16GB", 18_000, 12_000, id="p100"),
]


@pytest.mark.parametrize(("model", "nvlink", "pcie"), PER_MODEL)
def test_nccl_constants_per_model(model: str, nvlink: int, pcie: int) -> None:
    doc = uniform(2, "NV4", gpu_model=model)
    assert (BandwidthModel().nvlink_mbs(doc), BandwidthModel().pcie_mbs(doc)) == (nvlink, pcie)
