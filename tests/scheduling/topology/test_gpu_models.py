from __future__ import annotations

import pytest

from scheduling.topology.gpu_models import lookup_gpu_model

MODELS = [
    pytest.param("Tesla P100-SXM2-16GB", "P100", 60, 20_000, 4, id="p100"),
    pytest.param("Tesla V100-SXM2-16GB", "V100", 70, 25_000, 6, id="v100"),
    pytest.param("NVIDIA A100-SXM4-80GB", "A100", 80, 25_000, 12, id="a100"),
    pytest.param("NVIDIA A30", "A30", 80, 25_000, 4, id="a30"),
    pytest.param("NVIDIA RTX A6000", "GA102", 86, 14_062, 4, id="a6000"),
    pytest.param("NVIDIA A40", "GA102", 86, 14_062, 4, id="a40"),
    pytest.param("NVIDIA H100 80GB HBM3", "Hopper", 90, 25_000, 18, id="h100"),
    pytest.param("NVIDIA GB200", "Blackwell", 100, 50_000, 18, id="gb200"),
    pytest.param("NVIDIA L40S", "Ada", 89, None, 0, id="l40s"),
    pytest.param("NVIDIA GeForce RTX 4090", "Ada", 89, None, 0, id="rtx4090"),
]


@pytest.mark.parametrize(("name", "family", "cc", "link_mbs", "links"), MODELS)
def test_lookup(name: str, family: str, cc: int, link_mbs: int | None, links: int) -> None:
    info = lookup_gpu_model(name)
    assert info is not None
    assert (info.family, info.compute_capability, info.nvlink_link_mbs, info.nvlinks_per_gpu) == (
        family,
        cc,
        link_mbs,
        links,
    )


@pytest.mark.parametrize("name", ["NVIDIA RTX A3000", "NVIDIA A10", "Tesla K80", "NVIDIA A300", ""])
def test_unknown_or_lookalike_models(name: str) -> None:
    assert lookup_gpu_model(name) is None
