"""Import the text of ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s`` into a topology document.

Nodes whose agent cannot run NVML, tests, and operators describing a machine by hand all have this text
rather than NVML readings. Published outputs vary (tabs, hand-aligned spaces, a prompt or title line
before the matrix, NIC rows and columns, the legend after it, ``CPU Affinity`` / ``NUMA Affinity`` /
``GPU NUMA ID`` columns, rows cut off in ``.partial`` copies), so the parser anchors on the header line
and reads only what it recognises, and says precisely what it did not understand.

Reading rules for ``topo -m``:

* the header is the first line whose first word is ``GPU0`` and whose second word is not ``X``; text
  before it is ignored, and so is everything after the first line that is not a matrix row (the legend);
* cells are split on any whitespace (no cell value contains a space), so tabs, runs of spaces and the
  empty tab-separated cells some drivers print all read the same;
* only GPU rows are read; a pair is known when either of its two rows is present, and pairs between two
  missing rows stay unknown (``.partial`` files are never assumed square);
* the legacy label ``SOC`` reads as ``SYS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from scheduling.topology.builders import infer_nvswitch, model_facts
from scheduling.topology.document import TopologyDocument
from scheduling.topology.gpu_info import CPU_LIST_RE, GpuInfo
from scheduling.topology.links import parse_link
from scheduling.topology.topology_error import TopologyError

_GPU_LABEL_RE = re.compile(r"GPU([0-9]+)")
_TRAILING_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_TRAILING_RE = re.compile("|".join(re.escape(name) for name in _TRAILING_COLUMNS))
_LEGACY = {"SOC": "SYS"}


def parse_topo_matrix(text: str, *, gpu_model: str | None = None) -> TopologyDocument:
    """Read the output of ``nvidia-smi topo -m``.

    Args:
        text: the command's output, possibly with text before and after the matrix.
        gpu_model: the GPUs' model name (``topo -m`` does not print it); it fills the NVLink generation,
            link rate and PCIe generation, and bounds the link count used to recognise an NVSwitch.

    Returns:
        A document with every GPU of the header; UUIDs are unknown (see :func:`apply_nvlink_status`).

    Raises:
        TopologyError: no header, a malformed or duplicated row, a label that is not a link kind, a GPU
            row without ``X`` on its own column, rows that disagree about a pair, or values that do not
            fit the affinity columns. The message quotes the line number.
    """
    lines = text.splitlines()
    start = _find_header(lines)
    devices, trailing = _parse_header(lines[start], start + 1)
    gpu_count = sum(1 for name in devices if _GPU_LABEL_RE.fullmatch(name))
    kinds: dict[tuple[int, int], tuple[str, int]] = {}
    gpus: dict[int, GpuInfo] = {}
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        cells = line.split()
        if not cells or cells[0] not in devices:
            break
        label = _GPU_LABEL_RE.fullmatch(cells[0])
        if label is None:
            continue  # a NIC row: NIC locality is not part of the document
        index = int(label.group(1))
        if index in gpus:
            msg = f"line {number}: GPU{index} has a second row"
            raise TopologyError(msg)
        if len(cells) != 1 + len(devices) + len(trailing):
            msg = (
                f"line {number}: row GPU{index} has {len(cells) - 1} cells, expected {len(devices)} "
                f"link labels and {len(trailing)} affinity values"
            )
            raise TopologyError(msg)
        gpus[index] = _gpu_info(index, dict(zip(trailing, cells[1 + len(devices) :], strict=True)), number)
        for other, cell in enumerate(cells[1 : 1 + gpu_count]):
            _record(kinds, index, other, cell, number)
    if not gpus:
        msg = f"line {start + 1}: the topology header is not followed by any GPU row"
        raise TopologyError(msg)
    links = tuple(parse_link(a, b, kind) for (a, b), (kind, _) in sorted(kinds.items()))
    facts = model_facts(gpu_model)
    return TopologyDocument(
        gpus=tuple(gpus.get(i, GpuInfo(i)) for i in range(gpu_count)),
        links=links,
        nvswitch=infer_nvswitch(gpu_count, links, [facts.nvlinks_per_gpu] * gpu_count),
        gpu_model=gpu_model,
        compute_capability=facts.compute_capability,
        nvlink_gen=facts.nvlink_gen,
        nvlink_link_mbs=facts.nvlink_link_mbs,
        pcie_gen=facts.pcie_gen,
    )


def _find_header(lines: list[str]) -> int:
    for number, line in enumerate(lines):
        cells = line.split()
        if cells and cells[0] == "GPU0" and (len(cells) == 1 or cells[1] != "X"):
            return number
    msg = "no `nvidia-smi topo -m` header found (a line like 'GPU0 GPU1 ... CPU Affinity')"
    raise TopologyError(msg)


def _parse_header(line: str, number: int) -> tuple[list[str], list[str]]:
    cells = line.split()
    devices: list[str] = []
    for cell in cells:
        if cell in {"CPU", "NUMA", "GPU"}:
            break
        if cell in devices:
            msg = f"line {number}: column {cell} appears twice in the header"
            raise TopologyError(msg)
        devices.append(cell)
    gpu_labels = [name for name in devices if _GPU_LABEL_RE.fullmatch(name)]
    if gpu_labels != [f"GPU{i}" for i in range(len(gpu_labels))] or devices[: len(gpu_labels)] != gpu_labels:
        msg = f"line {number}: GPU columns must come first and run GPU0, GPU1, ... in order; got {devices}"
        raise TopologyError(msg)
    rest = " ".join(cells[len(devices) :])
    trailing = _TRAILING_RE.findall(rest)
    if _TRAILING_RE.sub("", rest).strip():
        msg = f"line {number}: unrecognised header text {rest!r} (known: {', '.join(_TRAILING_COLUMNS)})"
        raise TopologyError(msg)
    return devices, trailing


def _record(
    kinds: dict[tuple[int, int], tuple[str, int]], row: int, column: int, cell: str, number: int
) -> None:
    if row == column:
        if cell != "X":
            msg = f"line {number}: GPU{row} should be X on its own column, found {cell!r}"
            raise TopologyError(msg)
        return
    kind = _LEGACY.get(cell, cell)
    if kind == "X":
        msg = f"line {number}: X marks a GPU's own cell, found for GPU{row}-GPU{column}"
        raise TopologyError(msg)
    pair = (row, column) if row < column else (column, row)
    parse_link(*pair, kind)  # reject bad labels with the pair in the message
    seen = kinds.get(pair)
    if seen is not None and seen[0] != kind:
        msg = f"line {number}: GPU{row}-GPU{column} is {kind} here but {seen[0]} on line {seen[1]}"
        raise TopologyError(msg)
    kinds.setdefault(pair, (kind, number))


def _gpu_info(index: int, values: dict[str, str], number: int) -> GpuInfo:
    cpus = values.get("CPU Affinity", "N/A")
    if cpus != "N/A" and not CPU_LIST_RE.fullmatch(cpus):
        msg = f"line {number}: GPU{index} CPU affinity {cpus!r} is not a CPU list"
        raise TopologyError(msg)
    numa_text = values.get("NUMA Affinity", "N/A")
    numa: int | None = None
    if re.fullmatch(r"[0-9]{1,4}", numa_text):
        numa = int(numa_text)
    elif numa_text != "N/A" and not CPU_LIST_RE.fullmatch(numa_text):
        msg = f"line {number}: GPU{index} NUMA affinity {numa_text!r} is not a NUMA node"
        raise TopologyError(msg)
    return GpuInfo(index, numa_node=numa, cpu_affinity=None if cpus == "N/A" else cpus)


_STATUS_GPU_RE = re.compile(r"GPU ([0-9]+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)")
_STATUS_LINK_RE = re.compile(r"Link ([0-9]+): (?:([0-9]+(?:\.[0-9]+)?) GB/s|<inactive>)")
_ALL_INACTIVE = "all links are inactive"


@dataclass(frozen=True, slots=True)
class NvlinkStatus:
    """One GPU's block of ``nvidia-smi nvlink -s``.

    Attributes:
        index: the GPU index.
        model: the model name printed after the index.
        uuid: the GPU's UUID.
        link_mbs: the rate of each listed link in MB/s per direction, ``None`` for an inactive link.
    """

    index: int
    model: str
    uuid: str
    link_mbs: tuple[int | None, ...]

    @property
    def active_links(self) -> int:
        """How many links are up."""
        return sum(1 for rate in self.link_mbs if rate is not None)


def parse_nvlink_status(text: str) -> tuple[NvlinkStatus, ...]:
    r"""Read the output of ``nvidia-smi nvlink -s`` (lines before the first ``GPU n:`` line are ignored).

    Raises:
        TopologyError: a line is neither a GPU line, a link line, the "all links are inActive" notice,
            nor blank; or a GPU appears twice.

    >>> text = "GPU 0: NVIDIA A30 (UUID: GPU-1b574915-9e55)\n  Link 0: 14.062 GB/s\n  Link 1: <inactive>"
    >>> parse_nvlink_status(text)[0].link_mbs
    (14062, None)
    """
    blocks: list[NvlinkStatus] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        gpu = _STATUS_GPU_RE.fullmatch(line)
        if gpu is not None:
            index = int(gpu.group(1))
            if any(block.index == index for block in blocks):
                msg = f"line {number}: GPU {index} is listed twice"
                raise TopologyError(msg)
            blocks.append(NvlinkStatus(index, gpu.group(2), gpu.group(3), ()))
            continue
        if not blocks or not line or _ALL_INACTIVE in line.lower():
            continue
        link = _STATUS_LINK_RE.fullmatch(line)
        if link is None:
            msg = f"line {number}: {line!r} is not an `nvidia-smi nvlink -s` line"
            raise TopologyError(msg)
        rate = _gbs_to_mbs(link.group(2)) if link.group(2) is not None else None
        blocks[-1] = replace(blocks[-1], link_mbs=(*blocks[-1].link_mbs, rate))
    return tuple(blocks)


def apply_nvlink_status(doc: TopologyDocument, text: str) -> TopologyDocument:
    """Add what ``nvidia-smi nvlink -s`` knows to a document imported from ``topo -m``.

    Fills each listed GPU's UUID, the model name and the facts it implies (where the document has
    none), the measured per-link rate (the slowest active link; it replaces a rate taken from the
    model table), and re-decides ``nvswitch`` with each GPU's real active link count.

    Raises:
        TopologyError: the text names a GPU the document lacks, gives a GPU another UUID than the
            document, or its active link count contradicts the ``NV#`` labels (for a GPU whose pairs
            are all known): the two outputs are then from different machines or moments.
    """
    statuses = parse_nvlink_status(text)
    gpus = list(doc.gpus)
    for status in statuses:
        if status.index >= doc.gpu_count:
            msg = f"nvlink -s lists GPU {status.index} but the topology has GPU0..GPU{doc.gpu_count - 1}"
            raise TopologyError(msg)
        known = gpus[status.index].uuid
        if known is not None and known != status.uuid:
            msg = f"GPU{status.index}: nvlink -s says UUID {status.uuid}, the document says {known}"
            raise TopologyError(msg)
        gpus[status.index] = replace(gpus[status.index], uuid=status.uuid)
    models = {status.model for status in statuses}
    model = doc.gpu_model or (models.pop() if len(models) == 1 else None)
    facts = model_facts(model)
    rates = [rate for status in statuses for rate in status.link_mbs if rate is not None]
    bounds = [facts.nvlinks_per_gpu] * doc.gpu_count
    for status in statuses:
        bounds[status.index] = status.active_links
    updated = replace(
        doc,
        gpus=tuple(gpus),
        nvswitch=doc.nvswitch or infer_nvswitch(doc.gpu_count, doc.links, bounds),
        gpu_model=model,
        compute_capability=doc.compute_capability or facts.compute_capability,
        nvlink_gen=doc.nvlink_gen or facts.nvlink_gen,
        nvlink_link_mbs=min(rates) if rates else doc.nvlink_link_mbs or facts.nvlink_link_mbs,
        pcie_gen=doc.pcie_gen or facts.pcie_gen,
    )
    for status in statuses:
        _check_link_count(updated, status)
    return updated


def _check_link_count(doc: TopologyDocument, status: NvlinkStatus) -> None:
    index = status.index
    all_known = all(doc.link(index, other) is not None for other in range(doc.gpu_count) if other != index)
    claimed = doc.nvlink_count(index)
    if claimed > status.active_links or (all_known and claimed != status.active_links):
        msg = (
            f"GPU{index}: the topology matrix implies {claimed} NVLinks but nvlink -s shows "
            f"{status.active_links} active; are both outputs from the same machine?"
        )
        raise TopologyError(msg)


def _gbs_to_mbs(text: str) -> int:
    whole, _, fraction = text.partition(".")
    return int(whole) * 1000 + int((fraction + "000")[:3])
