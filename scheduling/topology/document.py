"""The GPU topology of one node, as stored in the node annotation ``phalanx.io/gpu-topology``.

The node agent (or an operator importing ``nvidia-smi`` text, see :mod:`scheduling.topology.smi_import`)
writes one :class:`TopologyDocument` per node; the scheduler reads thousands of them, so the JSON form is
compact: GPUs in index order, the upper triangle of the pair matrix as ``topo -m`` labels, and a few
node-wide facts. The version key ``"v"`` lets the format change without misreading old annotations.

Format, version 1 (keys sorted, no spaces; optional keys are left out when unknown)::

    {"gpus": [{"bus": "00000000:07:00.0", "cpus": "0-23,48-71", "numa": 0, "uuid": "GPU-..."}, ...],
     "links": [["NV4", "NODE", ...], ["NODE", ...], ...],   # row i: GPU i to GPUs i+1..n-1; null = unknown
     "nvswitch": false,
     "model": "NVIDIA RTX A6000", "cc": 86, "nvlink_gen": 3, "nvlink_mbs": 14062, "pcie_gen": 4,
     "v": 1}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from scheduling.topology.gpu_info import MODEL_RE, GpuInfo, check_pattern, check_range
from scheduling.topology.links import GpuLink, parse_link
from scheduling.topology.topology_error import TopologyError

TOPOLOGY_ANNOTATION = "phalanx.io/gpu-topology"
"""The node annotation that holds :meth:`TopologyDocument.to_json`."""

FORMAT_VERSION = 1
"""The ``"v"`` this code writes and the only one it reads."""

MAX_GPUS = 64
"""Largest GPU count a document may describe."""


@dataclass(frozen=True)
class TopologyDocument:
    """The GPU topology of one node: GPUs, what joins each pair, and node-wide link facts.

    Attributes:
        gpus: every GPU, ``gpus[i].index == i``.
        links: the known pairs, sorted by ``(a, b)``; a pair may be missing when the source did not show
            it (a ``.partial`` matrix), never because it is unconnected.
        nvswitch: the ``NV#`` links end at an NVSwitch: ``NV#`` is then each GPU's link count to the
            switch, not a dedicated bundle per pair (docs/design/nvlink-topology.md §1, §2.5).
        gpu_model: the GPU model name when known (``NVIDIA A100-SXM4-40GB``).
        compute_capability: CUDA compute capability times ten (NCCL's key for NVLink bandwidth).
        nvlink_gen: NVLink generation when known.
        nvlink_link_mbs: nominal rate of one NVLink per direction in MB/s (``nvlink -s`` prints it in GB/s).
        pcie_gen: PCIe generation of the GPUs' x16 host links when known.
    """

    gpus: tuple[GpuInfo, ...]
    links: tuple[GpuLink, ...] = ()
    nvswitch: bool = False
    gpu_model: str | None = None
    compute_capability: int | None = None
    nvlink_gen: int | None = None
    nvlink_link_mbs: int | None = None
    pcie_gen: int | None = None
    _by_pair: dict[tuple[int, int], GpuLink] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        count = len(self.gpus)
        if not 1 <= count <= MAX_GPUS:
            msg = f"a topology document describes 1..{MAX_GPUS} GPUs, got {count}"
            raise TopologyError(msg)
        for position, gpu in enumerate(self.gpus):
            if gpu.index != position:
                msg = f"GPUs must be listed in index order: position {position} holds GPU{gpu.index}"
                raise TopologyError(msg)
        by_pair: dict[tuple[int, int], GpuLink] = {}
        previous = (-1, -1)
        for link in self.links:
            if link.b >= count:
                msg = f"link GPU{link.a}-GPU{link.b} names a GPU beyond GPU{count - 1}"
                raise TopologyError(msg)
            if (link.a, link.b) <= previous:
                msg = f"links must be sorted by pair without repeats; GPU{link.a}-GPU{link.b} is misplaced"
                raise TopologyError(msg)
            previous = (link.a, link.b)
            by_pair[previous] = link
        object.__setattr__(self, "_by_pair", by_pair)
        check_pattern(self.gpu_model, MODEL_RE, "GPU model")
        check_range(self.compute_capability, 10, 999, "compute capability")
        check_range(self.nvlink_gen, 1, 20, "NVLink generation")
        check_range(self.nvlink_link_mbs, 1, 10_000_000, "NVLink rate (MB/s)")
        check_range(self.pcie_gen, 1, 20, "PCIe generation")

    @property
    def gpu_count(self) -> int:
        """How many GPUs the node has."""
        return len(self.gpus)

    @property
    def complete(self) -> bool:
        """Every GPU pair is known (false for a ``.partial`` matrix)."""
        return len(self._by_pair) == self.gpu_count * (self.gpu_count - 1) // 2

    def link(self, a: int, b: int) -> GpuLink | None:
        """What joins GPUs ``a`` and ``b`` (in either order), or ``None`` when the pair is unknown.

        >>> doc = TopologyDocument(gpus=(GpuInfo(0), GpuInfo(1)), links=(parse_link(0, 1, "PIX"),))
        >>> doc.link(1, 0).kind
        'PIX'
        """
        return self._by_pair.get((a, b) if a < b else (b, a))

    def nvlink_count(self, gpu: int) -> int:
        """NVLinks of ``gpu``: its switch links on an NVSwitch node, else the sum over its peers."""
        counts = [lk.nvlinks for lk in self.links if gpu in (lk.a, lk.b)]
        if self.nvswitch:
            return max(counts, default=0)
        return sum(counts)

    def bridged_pairs(self) -> tuple[tuple[int, int], ...]:
        """Pairs joined by NVLink where neither GPU has NVLink to anyone else (bridged PCIe cards).

        >>> doc = TopologyDocument(gpus=(GpuInfo(0), GpuInfo(1)), links=(parse_link(0, 1, "NV4"),))
        >>> doc.bridged_pairs()
        ((0, 1),)
        """
        if self.nvswitch:
            return ()
        peers: dict[int, list[int]] = {}
        for lk in self.links:
            if lk.nvlinks:
                peers.setdefault(lk.a, []).append(lk.b)
                peers.setdefault(lk.b, []).append(lk.a)
        return tuple(
            (a, found[0])
            for a, found in sorted(peers.items())
            if len(found) == 1 and a < found[0] and peers[found[0]] == [a]
        )

    def to_json(self) -> str:
        """The annotation text: compact JSON with sorted keys and ``"v": 1`` (see the module docstring)."""
        body: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "gpus": [_gpu_json(gpu) for gpu in self.gpus],
            "links": [
                [_link_json(self.link(a, b)) for b in range(a + 1, self.gpu_count)]
                for a in range(self.gpu_count - 1)
            ],
            "nvswitch": self.nvswitch,
        }
        for key, value in _optional_fields(self):
            if value is not None:
                body[key] = value
        return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


MAX_JSON_CHARS = 262_144
"""Longest annotation text :func:`from_json` reads (the API server caps all annotations at 256 KiB)."""

_TOP_KEYS = frozenset(
    {"v", "gpus", "links", "nvswitch", "model", "cc", "nvlink_gen", "nvlink_mbs", "pcie_gen"}
)
_GPU_KEYS = frozenset({"uuid", "bus", "numa", "cpus"})


def from_json(text: str) -> TopologyDocument:
    """Read a document written by :meth:`TopologyDocument.to_json`.

    Raises:
        TopologyError: the text is not JSON, is not a version-1 document, has unknown or missing keys,
            values of the wrong type or range, or a pair matrix of the wrong shape. The message names the
            offending key.

    >>> doc = from_json('{"gpus":[{},{}],"links":[["NV4"]],"nvswitch":false,"v":1}')
    >>> doc.link(0, 1).nvlinks
    4
    >>> from_json('{"v":2}')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    scheduling.topology.topology_error.TopologyError: unsupported topology document version 2 (this build...
    """
    if not isinstance(text, str):
        msg = f"a topology document is text, got {type(text).__name__}"
        raise TopologyError(msg)
    if len(text) > MAX_JSON_CHARS:
        msg = f"topology document is {len(text)} characters, more than the {MAX_JSON_CHARS} allowed"
        raise TopologyError(msg)
    try:
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:
        msg = f"topology document is not valid JSON: {exc}"
        raise TopologyError(msg) from exc
    if not isinstance(body, dict):
        msg = f"topology document must be a JSON object, got {_json_type(body)}"
        raise TopologyError(msg)
    if "v" not in body:
        msg = 'topology document has no version key "v"'
        raise TopologyError(msg)
    version = body["v"]
    if type(version) is not int or version != FORMAT_VERSION:
        msg = f"unsupported topology document version {version!r} (this build reads version {FORMAT_VERSION})"
        raise TopologyError(msg)
    _check_keys(body, _TOP_KEYS, {"v", "gpus", "links", "nvswitch"}, "topology document")
    gpus = _read_gpus(body["gpus"])
    links = _read_links(body["links"], len(gpus))
    nvswitch = body["nvswitch"]
    if not isinstance(nvswitch, bool):
        msg = f"nvswitch must be true or false, got {_json_type(nvswitch)}"
        raise TopologyError(msg)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        msg = f"model must be a string, got {_json_type(model)}"
        raise TopologyError(msg)
    return TopologyDocument(
        gpus=gpus,
        links=links,
        nvswitch=nvswitch,
        gpu_model=model,
        compute_capability=_opt_int(body.get("cc"), "cc"),
        nvlink_gen=_opt_int(body.get("nvlink_gen"), "nvlink_gen"),
        nvlink_link_mbs=_opt_int(body.get("nvlink_mbs"), "nvlink_mbs"),
        pcie_gen=_opt_int(body.get("pcie_gen"), "pcie_gen"),
    )


def _read_gpus(value: object) -> tuple[GpuInfo, ...]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_GPUS:
        msg = f"gpus must be a list of 1..{MAX_GPUS} objects, got {_json_type(value)}"
        raise TopologyError(msg)
    gpus = []
    for index, entry in enumerate(value):
        where = f"gpus[{index}]"
        if not isinstance(entry, dict):
            msg = f"{where} must be an object, got {_json_type(entry)}"
            raise TopologyError(msg)
        _check_keys(entry, _GPU_KEYS, set(), where)
        gpus.append(
            GpuInfo(
                index=index,
                uuid=_opt_str(entry.get("uuid"), f"{where}.uuid"),
                pci_bus_id=_opt_str(entry.get("bus"), f"{where}.bus"),
                numa_node=_opt_int(entry.get("numa"), f"{where}.numa"),
                cpu_affinity=_opt_str(entry.get("cpus"), f"{where}.cpus"),
            )
        )
    return tuple(gpus)


def _read_links(value: object, count: int) -> tuple[GpuLink, ...]:
    if not isinstance(value, list) or len(value) != count - 1:
        msg = f"links must be a list of {count - 1} rows for {count} GPUs, got {_json_type(value)}"
        raise TopologyError(msg)
    links = []
    for a, row in enumerate(value):
        if not isinstance(row, list) or len(row) != count - 1 - a:
            msg = f"links[{a}] must list GPU{a}'s links to GPU{a + 1}..GPU{count - 1}, got {_json_type(row)}"
            raise TopologyError(msg)
        for offset, cell in enumerate(row):
            b = a + 1 + offset
            if cell is None:
                continue
            if not isinstance(cell, str):
                msg = f"links[{a}][{offset}] (GPU{a}-GPU{b}) must be a string or null, got {_json_type(cell)}"
                raise TopologyError(msg)
            links.append(parse_link(a, b, cell))
    return tuple(links)


def _gpu_json(gpu: GpuInfo) -> dict[str, object]:
    fields = {"uuid": gpu.uuid, "bus": gpu.pci_bus_id, "numa": gpu.numa_node, "cpus": gpu.cpu_affinity}
    return {key: value for key, value in fields.items() if value is not None}


def _link_json(link: GpuLink | None) -> str | None:
    return link.text if link is not None else None


def _optional_fields(doc: TopologyDocument) -> tuple[tuple[str, object], ...]:
    return (
        ("model", doc.gpu_model),
        ("cc", doc.compute_capability),
        ("nvlink_gen", doc.nvlink_gen),
        ("nvlink_mbs", doc.nvlink_link_mbs),
        ("pcie_gen", doc.pcie_gen),
    )


def _check_keys(body: dict[str, object], allowed: frozenset[str], required: set[str], where: str) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        msg = f"{where} has unknown keys {unknown}"
        raise TopologyError(msg)
    missing = sorted(required - set(body))
    if missing:
        msg = f"{where} lacks the keys {missing}"
        raise TopologyError(msg)


def _opt_int(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{where} must be an integer, got {_json_type(value)}"
        raise TopologyError(msg)
    return value


def _opt_str(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        msg = f"{where} must be a string, got {_json_type(value)}"
        raise TopologyError(msg)
    return value


def _json_type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", float: "a number"}
    if value is None:
        return "null"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"the integer {value}"
    return names.get(type(value), type(value).__name__)
