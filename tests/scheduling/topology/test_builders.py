from __future__ import annotations

import pytest

from scheduling.topology import GpuLink, TopologyError, from_json, infer_nvswitch, uniform
from scheduling.topology.builders import model_facts

UNIFORM = [
    pytest.param(8, "SYS", None, False, id="8-sys"),
    pytest.param(4, "NODE", "NVIDIA L40S", False, id="4-node-l40s"),
    pytest.param(8, "NV12", None, True, id="8-nv12-switch"),
    pytest.param(4, "NV4", "NVIDIA A100-SXM4-40GB", False, id="4-nv4-hgx-a100-4gpu"),
    pytest.param(16, "NV6", "Tesla V100-SXM3-32GB", True, id="16-nv6-dgx2"),
    pytest.param(1, "SYS", None, False, id="single-gpu"),
]


@pytest.mark.parametrize(("count", "kind", "model", "switch"), UNIFORM)
def test_uniform(count: int, kind: str, model: str | None, switch: bool) -> None:
    doc = uniform(count, kind, gpu_model=model)
    assert doc.gpu_count == count
    assert doc.complete
    assert all(link.kind == kind for link in doc.links)
    assert doc.nvswitch is switch
    assert from_json(doc.to_json()) == doc


def test_uniform_rejects_bad_input() -> None:
    with pytest.raises(TopologyError, match=r"1\.\.64 GPUs, got 0"):
        uniform(0, "SYS")
    with pytest.raises(TopologyError, match="'QPI' is not a link kind"):
        uniform(1, "QPI")


NVSWITCH = [
    pytest.param(8, 12, 12, True, id="a100-nvswitch"),
    pytest.param(4, 4, 12, False, id="a100-4gpu-all-to-all"),
    pytest.param(4, 2, 6, False, id="v100-dgx-station-mesh"),
    pytest.param(3, 6, 6, True, id="v100-switch-three-gpus"),
    pytest.param(2, 4, 4, False, id="bridge"),
]


@pytest.mark.parametrize(("count", "nv", "per_gpu", "expected"), NVSWITCH)
def test_infer_nvswitch(count: int, nv: int, per_gpu: int, expected: bool) -> None:
    links = [GpuLink(a, b, nv) for a in range(count) for b in range(a + 1, count)]
    assert infer_nvswitch(count, links, [per_gpu] * count) is expected


def test_model_facts() -> None:
    assert model_facts("NVIDIA H100 80GB HBM3").pcie_gen == 5
    assert model_facts("NVIDIA L40S").nvlinks_per_gpu == 18  # no NVLink: only the generic bound applies
    assert model_facts("Unknown").compute_capability is None
