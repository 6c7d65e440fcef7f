"""Ways to make a :class:`TopologyDocument` without an NVML reading: uniform nodes and model facts.

Nodes without a topology annotation still need a document so that every node is scored the same way;
:func:`uniform` describes them as "every pair joined alike". :func:`infer_nvswitch` and
:func:`model_facts` are shared with the ``nvidia-smi`` importer, which has the same gaps to fill.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduling.topology.document import MAX_GPUS, TopologyDocument
from scheduling.topology.gpu_info import GpuInfo
from scheduling.topology.gpu_models import FALLBACK_NVLINKS_PER_GPU, lookup_gpu_model
from scheduling.topology.links import GpuLink, parse_link
from scheduling.topology.topology_error import TopologyError


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """The node-wide document fields a GPU model name implies (all ``None`` for an unknown model).

    Attributes:
        compute_capability: see :attr:`TopologyDocument.compute_capability`.
        nvlink_gen: see :attr:`TopologyDocument.nvlink_gen`.
        nvlink_link_mbs: see :attr:`TopologyDocument.nvlink_link_mbs`.
        pcie_gen: see :attr:`TopologyDocument.pcie_gen`.
        nvlinks_per_gpu: the most NVLinks one GPU can have, a bound for :func:`infer_nvswitch`.
    """

    compute_capability: int | None = None
    nvlink_gen: int | None = None
    nvlink_link_mbs: int | None = None
    pcie_gen: int | None = None
    nvlinks_per_gpu: int = FALLBACK_NVLINKS_PER_GPU


def model_facts(gpu_model: str | None) -> ModelFacts:
    """The facts ``gpu_model`` implies (see :mod:`scheduling.topology.gpu_models`).

    >>> model_facts("Tesla V100-SXM2-16GB").nvlinks_per_gpu
    6
    >>> model_facts(None).nvlink_gen is None
    True
    """
    info = lookup_gpu_model(gpu_model) if gpu_model is not None else None
    if info is None:
        return ModelFacts()
    return ModelFacts(
        compute_capability=info.compute_capability,
        nvlink_gen=info.nvlink_gen,
        nvlink_link_mbs=info.nvlink_link_mbs,
        pcie_gen=info.pcie_gen,
        nvlinks_per_gpu=info.nvlinks_per_gpu if info.nvlink_gen else FALLBACK_NVLINKS_PER_GPU,
    )


def infer_nvswitch(gpu_count: int, links: Iterable[GpuLink], nvlinks_per_gpu: Sequence[int]) -> bool:
    """Decide from ``NV#`` labels alone whether the NVLinks end at an NVSwitch.

    ``topo -m`` on an NVSwitch node prints each GPU's whole link count for every pair, so the ``NV#`` of a
    GPU's pairs add up to more links than the GPU has (docs/design/nvlink-topology.md §2.5, fallback 3). A GPU
    whose sum does not exceed its link count has direct links (cube-mesh, bridges, 4-GPU all-to-all boards).

    Args:
        gpu_count: GPUs on the node.
        links: the known pairs.
        nvlinks_per_gpu: the most NVLinks each GPU can have (from the model, ``nvlink -s``, or a bound).

    >>> infer_nvswitch(3, [GpuLink(0, 1, 6), GpuLink(0, 2, 6), GpuLink(1, 2, 6)], [6, 6, 6])
    True
    >>> infer_nvswitch(3, [GpuLink(0, 1, 2), GpuLink(0, 2, 2), GpuLink(1, 2, 2)], [6, 6, 6])
    False
    """
    totals = [0] * gpu_count
    for lk in links:
        totals[lk.a] += lk.nvlinks
        totals[lk.b] += lk.nvlinks
    return any(total > bound for total, bound in zip(totals, nvlinks_per_gpu, strict=True))


def uniform(
    gpu_count: int, kind: str, *, gpu_model: str | None = None, nvswitch: bool | None = None
) -> TopologyDocument:
    """A node whose GPUs are all joined the same way, for nodes without a topology annotation.

    Args:
        gpu_count: GPUs on the node.
        kind: the label every pair gets (``"SYS"``, ``"NODE"``, ``"NV12"``...).
        gpu_model: the model name, which fills the NVLink and PCIe facts it implies.
        nvswitch: whether ``NV#`` means switch links; ``None`` decides as :func:`infer_nvswitch` does.

    Raises:
        TopologyError: ``gpu_count`` is out of range or ``kind`` is not a link kind.

    >>> doc = uniform(8, "SYS")
    >>> (doc.gpu_count, doc.link(0, 7).kind, doc.nvswitch)
    (8, 'SYS', False)
    >>> uniform(8, "NV12").nvswitch
    True
    """
    if not 1 <= gpu_count <= MAX_GPUS:
        msg = f"a topology document describes 1..{MAX_GPUS} GPUs, got {gpu_count}"
        raise TopologyError(msg)
    parse_link(0, 1, kind)  # reject a bad kind even for a one-GPU node
    links = tuple(parse_link(a, b, kind) for a in range(gpu_count) for b in range(a + 1, gpu_count))
    facts = model_facts(gpu_model)
    if nvswitch is None:
        nvswitch = infer_nvswitch(gpu_count, links, [facts.nvlinks_per_gpu] * gpu_count)
    return TopologyDocument(
        gpus=tuple(GpuInfo(i) for i in range(gpu_count)),
        links=links,
        nvswitch=nvswitch,
        gpu_model=gpu_model,
        compute_capability=facts.compute_capability,
        nvlink_gen=facts.nvlink_gen,
        nvlink_link_mbs=facts.nvlink_link_mbs,
        pcie_gen=facts.pcie_gen,
    )
