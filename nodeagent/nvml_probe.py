"""The NVML calls for one GPU and one GPU pair, each with its error policy.

Every call answers one of three ways, decided by the error code (docs/design/nvlink-topology.md §2.4):

* a value;
* "absent" (``NOT_SUPPORTED``, ``FUNCTION_NOT_FOUND`` on an old driver, and for per-link calls also
  ``INVALID_ARGUMENT``, which NVML returns for a link slot the GPU does not have): the fact is left out;
* "this GPU is gone" (``GPU_IS_LOST``, ``RESET_REQUIRED``): :class:`GpuGoneError`, and the caller
  leaves the GPU out of the document.

Any other error of a structural call (count, handle, PCI info, link state, remote end, common
ancestor) propagates: a topology with silently missing links would mislead the scorer more than no
update at all. Descriptive facts (NUMA node, CPU affinity, name, compute capability, PCIe generation,
MIG mode, NVLink version, remote device type) degrade to ``None`` on any other error, with a warning.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from nodeagent.nvml_api import (
    NvmlModule,
    absent_codes,
    absent_link_codes,
    error_code,
    error_name,
    gpu_gone_codes,
    nvlink_generation,
)
from nodeagent.nvml_values import BusKey, bus_of, cpulist_from_mask, text_of
from scheduling.topology.gpu_info import CPU_LIST_RE, MODEL_RE, UUID_RE

T = TypeVar("T")

CPU_SET_WORDS = 64
"""Words of 64 bits asked from ``nvmlDeviceGetCpuAffinity``: room for 4096 CPUs."""


class GpuGoneError(Exception):
    """A GPU stopped answering (fell off the bus, needs a reset); it is left out of the document."""

    def __init__(self, index: int, call: str, reason: str) -> None:
        super().__init__(f"GPU{index}: {reason} during {call}")
        self.index = index


@dataclass(frozen=True, slots=True)
class RemoteEnd:
    """The far end of one active NVLink: its PCI address and NVML device type (``None`` if unknown)."""

    link: int
    bus: BusKey | None
    device_type: int | None


@dataclass(slots=True)
class GpuFacts:
    """What NVML said about one GPU; ``None`` fields are facts NVML did not give."""

    index: int
    handle: object
    uuid: str | None = None
    bus: BusKey | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    name: str | None = None
    compute_capability: int | None = None
    pcie_gen: int | None = None
    mig_enabled: bool = False
    nvlink_gen: int | None = None
    remotes: list[RemoteEnd] = field(default_factory=list)


class GpuProbe:
    """Asks NVML about single GPUs and pairs; the reader decides what the answers mean together."""

    def __init__(self, nvml: NvmlModule, log: logging.Logger, *, cpu_set_words: int = CPU_SET_WORDS) -> None:
        self._nvml = nvml
        self._log = log
        self._words = cpu_set_words
        self._absent = absent_codes(nvml)
        self._absent_link = absent_link_codes(nvml)
        self._gone = gpu_gone_codes(nvml)

    def read_gpu(self, index: int) -> GpuFacts:
        """Identity, locality and descriptive facts of GPU ``index`` (NVLinks: :meth:`read_nvlinks`).

        Raises:
            GpuGoneError: the GPU stopped answering.
            NVMLError: an unexpected error of a structural call.
        """
        nvml = self._nvml
        handle = self._call(index, nvml.nvmlDeviceGetHandleByIndex, index, absent=frozenset())
        gpu = GpuFacts(index, handle)
        uuid = self._call(index, nvml.nvmlDeviceGetUUID, handle, absent=self._absent)
        gpu.uuid = self._checked(index, "UUID", uuid, UUID_RE)
        gpu.bus = bus_of(self._call(index, nvml.nvmlDeviceGetPciInfo, handle, absent=self._absent))
        numa = self._optional(index, nvml.nvmlDeviceGetNumaNodeId, handle)
        gpu.numa_node = numa if isinstance(numa, int) and 0 <= numa <= 4095 else None
        mask = _mask_words(self._optional(index, nvml.nvmlDeviceGetCpuAffinity, handle, self._words))
        cpus = cpulist_from_mask(mask) if mask is not None else None
        gpu.cpu_affinity = self._checked(index, "CPU affinity", cpus, CPU_LIST_RE)
        name = self._optional(index, nvml.nvmlDeviceGetName, handle)
        gpu.name = self._checked(index, "name", name, MODEL_RE)
        capability = self._optional(index, nvml.nvmlDeviceGetCudaComputeCapability, handle)
        if isinstance(capability, tuple | list) and len(capability) == 2:
            value = int(capability[0]) * 10 + int(capability[1])
            gpu.compute_capability = value if 10 <= value <= 999 else None
        pcie_gen = self._optional(index, nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle)
        gpu.pcie_gen = pcie_gen if isinstance(pcie_gen, int) and 1 <= pcie_gen <= 20 else None
        mig = self._optional(index, nvml.nvmlDeviceGetMigMode, handle)
        gpu.mig_enabled = _first(mig) == nvml.NVML_DEVICE_MIG_ENABLE
        return gpu

    def read_nvlinks(self, gpu: GpuFacts) -> None:
        """Fill ``gpu.remotes`` (active links) and ``gpu.nvlink_gen`` by walking every link slot.

        The walk covers ``0..NVML_NVLINK_MAX_LINKS-1`` (36 in pynvml 13.615; older releases had fewer) and
        skips a slot whose state call says NOT_SUPPORTED or INVALID_ARGUMENT, and one whose state is not
        ``NVML_FEATURE_ENABLED`` (§2.3, §2.4). A GPU without NVLink skips every slot and has no remotes.

        Raises:
            GpuGoneError: the GPU stopped answering.
            NVMLError: an unexpected error of the state or remote-end call.
        """
        nvml, index, handle = self._nvml, gpu.index, gpu.handle
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            state = self._call(index, nvml.nvmlDeviceGetNvLinkState, handle, link, absent=self._absent_link)
            if state is None:
                continue
            if gpu.nvlink_gen is None:
                version = self._optional(index, nvml.nvmlDeviceGetNvLinkVersion, handle, link)
                gpu.nvlink_gen = nvlink_generation(nvml, version) if isinstance(version, int) else None
            if state != nvml.NVML_FEATURE_ENABLED:
                continue
            remote = self._call(
                index, nvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link, absent=self._absent_link
            )
            if remote is None:
                self._log.debug("GPU%d link %d is up but its remote end is unknown; not counted", index, link)
                continue
            device_type = self._optional(index, nvml.nvmlDeviceGetNvLinkRemoteDeviceType, handle, link)
            gpu.remotes.append(
                RemoteEnd(link, bus_of(remote), device_type if isinstance(device_type, int) else None)
            )

    def common_ancestor(self, first: GpuFacts, second: GpuFacts) -> int | None:
        """The ``NVML_TOPOLOGY_*`` value of a pair, ``None`` if unsupported.

        Raises:
            GpuGoneError: one of the two GPUs stopped answering; which one is found by :meth:`is_gone`.
            NVMLError: an unexpected error.
        """
        value = self._call(
            first.index,
            self._nvml.nvmlDeviceGetTopologyCommonAncestor,
            first.handle,
            second.handle,
            absent=self._absent,
        )
        return value if isinstance(value, int) else None

    def is_gone(self, gpu: GpuFacts) -> bool:
        """Whether ``gpu`` stopped answering: asked after a pair call reported a lost GPU."""
        try:
            self._nvml.nvmlDeviceGetPciInfo(gpu.handle)
        except self._nvml.NVMLError as exc:
            return error_code(exc) in self._gone
        return False

    def _call(self, index: int, fn: Callable[..., T], *args: object, absent: frozenset[int]) -> T | None:
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            code = error_code(exc)
            if code in absent:
                self._log.debug("GPU%d: %s says %s", index, _name(fn), error_name(exc))
                return None
            if code in self._gone:
                raise GpuGoneError(index, _name(fn), error_name(exc)) from exc
            raise

    def _optional(self, index: int, fn: Callable[..., T], *args: object) -> T | None:
        try:
            return self._call(index, fn, *args, absent=self._absent)
        except GpuGoneError:
            raise
        except self._nvml.NVMLError as exc:
            self._log.warning("GPU%d: %s failed with %s; fact left out", index, _name(fn), error_name(exc))
            return None

    def _checked(self, index: int, what: str, value: object, pattern: re.Pattern[str]) -> str | None:
        if value is None:
            return None
        text = text_of(value).strip()
        if pattern.fullmatch(text):
            return text
        self._log.warning("GPU%d: NVML gave a malformed %s %r; left out", index, what, text)
        return None


def _name(fn: Callable[..., object]) -> str:
    return getattr(fn, "__name__", repr(fn))


def _mask_words(value: object) -> list[int] | None:
    """The words of an affinity mask: pynvml returns a ctypes array, which iterates as ints."""
    if value is None or not isinstance(value, Iterable):
        return None
    words = list(value)
    return words if all(isinstance(word, int) for word in words) else None


def _first(value: object) -> object:
    if isinstance(value, list | tuple) and value:
        return value[0]
    return None
