"""Interconnect facts that follow from a GPU's model name.

``nvidia-smi topo -m`` says how many NVLinks join two GPUs but not how fast one link is, and it does not
say whether the ``NV#`` links end at an NVSwitch. The model name (given by the operator, printed by
``nvidia-smi nvlink -s``, or read through NVML by the node agent) fills those gaps. Only models whose
figures are in docs/design/nvlink-topology.md are listed: the NVLink generation, nominal per-link rate and
links per GPU from §4.1, the architecture (NCCL keys its effective bandwidth on it) from §4.2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuModelInfo:
    """What a GPU model implies for its interconnect.

    Attributes:
        family: a short name for the family the pattern matched (``"V100"``, ``"GA102"``...).
        compute_capability: CUDA compute capability times ten (``86`` for 8.6), NCCL's key for the
            effective NVLink bandwidth.
        nvlink_gen: NVLink generation, ``None`` for PCIe-only models.
        nvlink_link_mbs: nominal rate of one NVLink, per direction, in MB/s; ``None`` without NVLink.
        nvlinks_per_gpu: NVLinks one GPU has in total (0 without NVLink).
        pcie_gen: the PCIe generation of the GPU's x16 host link.
    """

    family: str
    compute_capability: int
    nvlink_gen: int | None
    nvlink_link_mbs: int | None
    nvlinks_per_gpu: int
    pcie_gen: int


_P100 = GpuModelInfo("P100", 60, 1, 20_000, 4, 3)
_V100 = GpuModelInfo("V100", 70, 2, 25_000, 6, 3)
_A100 = GpuModelInfo("A100", 80, 3, 25_000, 12, 4)
_A30 = GpuModelInfo("A30", 80, 3, 25_000, 4, 4)
_GA102 = GpuModelInfo("GA102", 86, 3, 14_062, 4, 4)
_HOPPER = GpuModelInfo("Hopper", 90, 4, 25_000, 18, 5)
_BLACKWELL = GpuModelInfo("Blackwell", 100, 5, 50_000, 18, 5)
_ADA = GpuModelInfo("Ada", 89, None, None, 0, 4)

_MODELS: tuple[tuple[re.Pattern[str], GpuModelInfo], ...] = (
    (re.compile(r"\bP100\b", re.IGNORECASE), _P100),
    (re.compile(r"\bV100S?\b", re.IGNORECASE), _V100),
    (re.compile(r"\bA100\b", re.IGNORECASE), _A100),
    (re.compile(r"\bA30\b", re.IGNORECASE), _A30),
    (re.compile(r"\b(?:A6000|A40)\b", re.IGNORECASE), _GA102),
    (re.compile(r"\b(?:GH200|H100|H200)\b", re.IGNORECASE), _HOPPER),
    (re.compile(r"\b(?:GB200|B200)\b", re.IGNORECASE), _BLACKWELL),
    (re.compile(r"\b(?:L40S|L40|RTX 4090)\b", re.IGNORECASE), _ADA),
)

FALLBACK_NVLINKS_PER_GPU = 18
"""The most NVLinks any listed GPU has (H100, B200); the bound used when the model is unknown."""


def lookup_gpu_model(name: str) -> GpuModelInfo | None:
    """Return what the model name implies, or ``None`` for a model this table does not know.

    >>> lookup_gpu_model("NVIDIA RTX A6000").nvlink_link_mbs
    14062
    >>> lookup_gpu_model("Tesla V100-SXM2-16GB").family
    'V100'
    >>> lookup_gpu_model("NVIDIA GeForce GTX 1080") is None
    True
    """
    for pattern, info in _MODELS:
        if pattern.search(name):
            return info
    return None
