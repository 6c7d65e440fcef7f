"""Read a node's GPU topology through NVML and turn it into a :class:`TopologyDocument`.

One :meth:`NvmlTopologyReader.read` is one ``nvmlInit`` … ``nvmlShutdown`` session, so a driver that is
installed or upgraded while the agent runs is picked up at the next read. The reader never raises an
NVML error: every outcome is an :class:`NvmlReading` whose status says what happened, and whose document
is either valid or ``None``. What the document holds, per GPU and per pair
(docs/design/nvlink-topology.md §6):

* GPU index (NVML's), UUID, PCI bus id (NVML's ``00000000:07:00.0`` form), NUMA node
  (``nvmlDeviceGetNumaNodeId``, else unknown: no sysfs), CPU affinity as a cpulist;
* per pair, the NVLink count (active links whose far end is the other GPU's bus id, compared as numbers)
  and the PCIe common-ancestor level. On an NVSwitch node (a link whose far end is a switch, or a
  device that is neither a GPU of this node nor a CPU) a pair's count is the smaller of the two GPUs'
  switch link counts, the meaning ``topo -m`` gives ``NV#`` there (docs/design/nvlink-topology.md §1, §2.5);
* node-wide: model name, compute capability, NVLink generation and PCIe generation as NVML reports them,
  falling back to what the model name implies (as the ``nvidia-smi`` importer does); the per-link NVLink
  rate comes from the model name only (NVML has it only in field values, which are not read).

Degraded cases: a lost GPU keeps its index as a bare entry without facts and without pairs, so indices
still match NVML's and the document stays valid (status ``PARTIAL``); a GPU in MIG mode keeps its
identity and PCIe levels but gets no NVLink credit, since MIG slices get no NVLink P2P (§2.6). All
queries use full-GPU handles: ``nvmlDeviceGetHandleByIndex`` never returns MIG instances.
"""

from __future__ import annotations

import enum
import logging
from collections import Counter
from dataclasses import dataclass

from nodeagent.nvml_api import NvmlModule, error_code, error_name, pcie_level, unavailable_codes
from nodeagent.nvml_probe import CPU_SET_WORDS, GpuFacts, GpuGoneError, GpuProbe
from nodeagent.nvml_values import BusKey
from scheduling.topology import GpuInfo, GpuLink, TopologyDocument, TopologyError
from scheduling.topology.builders import model_facts
from scheduling.topology.document import MAX_GPUS


class ReadStatus(enum.Enum):
    """How one read ended."""

    COMPLETE = "complete"
    """Every GPU and every pair was read."""
    PARTIAL = "partial"
    """A valid document with GPUs left out (lost) or pairs unknown."""
    NO_GPUS = "no_gpus"
    """NVML works and reports no GPU."""
    NVML_UNAVAILABLE = "nvml_unavailable"
    """The library or the driver cannot be loaded (yet); try again later."""
    FAILED = "failed"
    """NVML answered with an unexpected error, or every GPU is lost; try again later."""


@dataclass(frozen=True, slots=True)
class NvmlReading:
    """The result of one read.

    Attributes:
        status: how the read ended.
        document: the topology, present exactly for ``COMPLETE`` and ``PARTIAL``.
        lost_gpus: indices of GPUs that stopped answering; they are bare entries in the document.
        mig_gpus: indices of GPUs in MIG mode; their NVLinks are not counted.
        detail: what went wrong, for logs, when the status is not ``COMPLETE``.
    """

    status: ReadStatus
    document: TopologyDocument | None = None
    lost_gpus: tuple[int, ...] = ()
    mig_gpus: tuple[int, ...] = ()
    detail: str = ""


class NvmlTopologyReader:
    """Reads the topology through an NVML module (``pynvml`` or a fake)."""

    def __init__(
        self, nvml: NvmlModule, *, log: logging.Logger | None = None, cpu_set_words: int = CPU_SET_WORDS
    ) -> None:
        self._nvml = nvml
        self._log = log or logging.getLogger(__name__)
        self._probe = GpuProbe(nvml, self._log, cpu_set_words=cpu_set_words)

    def read(self) -> NvmlReading:
        """One NVML session: init, read every GPU and pair, shut down. Logs what it could not read."""
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            detail = f"NVML cannot start: {exc} [{error_name(exc)}]"
            if error_code(exc) in unavailable_codes(nvml):
                self._log.warning("%s; is the NVIDIA driver installed and visible? retrying later", detail)
                return NvmlReading(ReadStatus.NVML_UNAVAILABLE, detail=detail)
            self._log.error("%s; retrying later", detail)
            return NvmlReading(ReadStatus.FAILED, detail=detail)
        try:
            return self._read_session()
        except nvml.NVMLError as exc:
            detail = f"NVML failed while reading the topology: {exc} [{error_name(exc)}]"
            self._log.error("%s; nothing published, retrying later", detail)
            return NvmlReading(ReadStatus.FAILED, detail=detail)
        finally:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError as exc:
                self._log.warning("nvmlShutdown failed: %s [%s]", exc, error_name(exc))

    def _read_session(self) -> NvmlReading:
        count = self._nvml.nvmlDeviceGetCount()
        if count <= 0:
            self._log.warning("NVML reports no GPU on this node; nothing to publish")
            return NvmlReading(ReadStatus.NO_GPUS, detail="NVML reports no GPU")
        if count > MAX_GPUS:
            detail = f"NVML reports {count} GPUs, more than the {MAX_GPUS} a topology document holds"
            self._log.error(detail)
            return NvmlReading(ReadStatus.FAILED, detail=detail)
        gpus: dict[int, GpuFacts] = {}
        lost: dict[int, str] = {}
        for index in range(count):
            try:
                gpus[index] = self._probe.read_gpu(index)
            except GpuGoneError as gone:
                lost[index] = str(gone)
        for gpu in list(gpus.values()):
            try:
                self._probe.read_nvlinks(gpu)
            except GpuGoneError as gone:
                lost[gpu.index] = str(gone)
        levels = self._pair_levels(gpus, lost)
        for index, reason in sorted(lost.items()):
            self._log.warning("%s; GPU%d is left out of the topology", reason, index)
        if len(lost) == count:
            detail = f"all {count} GPUs are lost"
            self._log.error(detail)
            return NvmlReading(ReadStatus.FAILED, lost_gpus=tuple(sorted(lost)), detail=detail)
        return self._assemble(count, gpus, levels, tuple(sorted(lost)))

    def _pair_levels(self, gpus: dict[int, GpuFacts], lost: dict[int, str]) -> dict[tuple[int, int], int]:
        levels: dict[tuple[int, int], int] = {}
        indices = sorted(gpus)
        for position, a in enumerate(indices):
            for b in indices[position + 1 :]:
                if a in lost or b in lost:
                    continue
                try:
                    value = self._probe.common_ancestor(gpus[a], gpus[b])
                except GpuGoneError as gone:
                    for gpu in (gpus[a], gpus[b]):
                        if self._probe.is_gone(gpu):
                            lost[gpu.index] = f"GPU{gpu.index}: lost during the common-ancestor query"
                    if a not in lost and b not in lost:
                        self._log.warning("%s; pair GPU%d-GPU%d left unknown", gone, a, b)
                    continue
                if value is not None:
                    levels[(a, b)] = value
        return levels

    def _assemble(
        self,
        count: int,
        gpus: dict[int, GpuFacts],
        levels: dict[tuple[int, int], int],
        lost: tuple[int, ...],
    ) -> NvmlReading:
        alive = {index: gpu for index, gpu in gpus.items() if index not in lost}
        lost_buses = {gpu.bus for index, gpu in gpus.items() if index in lost and gpu.bus is not None}
        peers, switch_links = self._classify_links(alive, lost_buses)
        mig = tuple(sorted(index for index, gpu in alive.items() if gpu.mig_enabled))
        for index in mig:
            if peers[index] or switch_links[index]:
                self._log.info("GPU%d is in MIG mode: its NVLinks get no credit (no P2P for MIG)", index)
        links = []
        indices = sorted(alive)
        for position, a in enumerate(indices):
            for b in indices[position + 1 :]:
                nvlinks = 0 if a in mig or b in mig else self._pair_nvlinks(a, b, peers, switch_links)
                level = pcie_level(self._nvml, levels[(a, b)]) if (a, b) in levels else None
                if nvlinks or level is not None:
                    links.append(GpuLink(a, b, nvlinks=nvlinks, pcie=level))
        infos = tuple(_gpu_info(alive[i]) if i in alive else GpuInfo(i) for i in range(count))
        try:
            document = self._document(infos, tuple(links), alive, switch_links, mig)
        except TopologyError as exc:
            detail = f"NVML's answers do not form a valid topology document: {exc}"
            self._log.error(detail)
            return NvmlReading(ReadStatus.FAILED, lost_gpus=lost, mig_gpus=mig, detail=detail)
        if lost or not document.complete:
            detail = f"lost GPUs {list(lost)}" if lost else "some GPU pairs are unknown"
            return NvmlReading(ReadStatus.PARTIAL, document, lost, mig, detail)
        return NvmlReading(ReadStatus.COMPLETE, document, lost, mig)

    def _classify_links(
        self, alive: dict[int, GpuFacts], lost_buses: set[BusKey]
    ) -> tuple[dict[int, Counter[int]], Counter[int]]:
        """Count each GPU's links per peer GPU and to switches, matching far ends by bus id."""
        nvml = self._nvml
        by_bus = {gpu.bus: index for index, gpu in alive.items() if gpu.bus is not None}
        peers: dict[int, Counter[int]] = {index: Counter() for index in alive}
        switch_links: Counter[int] = Counter()
        for index, gpu in alive.items():
            for remote in gpu.remotes:
                kind = remote.device_type
                if kind == nvml.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                    switch_links[index] += 1
                elif kind == nvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU:
                    continue  # a link to the CPU (POWER9): not a GPU-to-GPU path
                elif remote.bus in by_bus:
                    peers[index][by_bus[remote.bus]] += 1
                elif kind == nvml.NVML_NVLINK_DEVICE_TYPE_GPU or remote.bus in {None, *lost_buses}:
                    self._log.info("GPU%d link %d ends at a GPU left out; not counted", index, remote.link)
                else:
                    # Neither a GPU of this node nor a CPU: NCCL treats such an end as an NVSwitch (§2.5).
                    switch_links[index] += 1
        return peers, switch_links

    def _pair_nvlinks(
        self, a: int, b: int, peers: dict[int, Counter[int]], switch_links: Counter[int]
    ) -> int:
        forward, backward = peers[a][b], peers[b][a]
        if forward != backward:
            self._log.warning(
                "GPU%d sees %d NVLinks to GPU%d, which sees %d back; counting the smaller",
                a,
                forward,
                b,
                backward,
            )
        through_switch = min(switch_links[a], switch_links[b])
        return min(forward, backward) + through_switch

    def _document(
        self,
        infos: tuple[GpuInfo, ...],
        links: tuple[GpuLink, ...],
        alive: dict[int, GpuFacts],
        switch_links: Counter[int],
        mig: tuple[int, ...],
    ) -> TopologyDocument:
        names = {gpu.name for gpu in alive.values() if gpu.name is not None}
        if len(names) > 1:
            self._log.warning("GPUs of several models %s; the document names none", sorted(names))
        model = names.pop() if len(names) == 1 else None
        facts = model_facts(model)
        capabilities = {gpu.compute_capability for gpu in alive.values() if gpu.compute_capability}
        generations = [gpu.nvlink_gen for gpu in alive.values() if gpu.nvlink_gen is not None]
        pcie = [gpu.pcie_gen for gpu in alive.values() if gpu.pcie_gen is not None]
        return TopologyDocument(
            gpus=infos,
            links=links,
            nvswitch=any(switch_links[index] for index in alive if index not in mig),
            gpu_model=model,
            compute_capability=capabilities.pop() if len(capabilities) == 1 else facts.compute_capability,
            nvlink_gen=min(generations) if generations else facts.nvlink_gen,
            nvlink_link_mbs=facts.nvlink_link_mbs,
            pcie_gen=min(pcie) if pcie else facts.pcie_gen,
        )


def _gpu_info(gpu: GpuFacts) -> GpuInfo:
    return GpuInfo(
        index=gpu.index,
        uuid=gpu.uuid,
        pci_bus_id=gpu.bus.canonical if gpu.bus is not None else None,
        numa_node=gpu.numa_node,
        cpu_affinity=gpu.cpu_affinity,
    )
