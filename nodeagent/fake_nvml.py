"""A stand-in for the ``pynvml`` module that answers from a :class:`TopologyDocument`.

Tests (and ``--fake-topology`` runs of the agent on machines without GPUs) need NVML answers that are
consistent with a known topology, including the awkward parts of the real API: NVLink peers are found
only through remote PCI bus ids (spelled in NVML's short lower-case form, unlike the GPU's own
``busId``), NVSwitch links end at switch bus ids and report ``NVML_NVLINK_DEVICE_TYPE_SWITCH``, link
slots past a GPU's links answer ``INVALID_ARGUMENT``, NVLink calls on a GPU without NVLink answer
``NOT_SUPPORTED``, and the common-ancestor call returns ``NVML_TOPOLOGY_*`` values. The layout of links
and switches comes from :mod:`nodeagent.fake_layout`.

Failure knobs: ``init_error`` (``nvmlInit`` raises that code: library missing, driver not loaded),
``lose_gpu`` (a GPU answers ``GPU_IS_LOST`` from the first call of a given function on it onwards),
``nvlink_unsupported``, ``mig_gpus`` and ``errors`` (a function always raises a given code). NVML
events (critical Xids) come from :mod:`nodeagent.fake_nvml_events` (``inject_xid``, ``xid_file``).
"""

# ruff: noqa: N802 - the methods carry pynvml's own camelCase names

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from nodeagent import nvml_constants as c
from nodeagent.fake_layout import FakeGpu, FakeLink, FakeNode, layout
from nodeagent.fake_nvml_events import FakeNvmlEvents
from nodeagent.nvml_api import nvml_topology_value, nvml_version_value
from nodeagent.nvml_values import mask_from_cpulist
from scheduling.topology import PcieLevel, TopologyDocument

V = TypeVar("V")


class FakeNvmlError(Exception):
    """The fake's ``NVMLError``: like pynvml's, it keeps the ``NVML_ERROR_*`` code in ``.value``."""

    def __init__(self, value: int) -> None:
        super().__init__(c.ERROR_NAMES.get(value, f"NVML error {value}"))
        self.value = value


_ERROR_CLASSES: dict[int, type[FakeNvmlError]] = {
    code: type(f"NVMLError_{name}", (FakeNvmlError,), {}) for code, name in c.ERROR_CLASS_NAMES.items()
}


def nvml_error(code: int) -> FakeNvmlError:
    """An error of the subclass pynvml would raise for ``code`` (``NVMLError_NotSupported``...)."""
    return _ERROR_CLASSES.get(code, FakeNvmlError)(code)


@dataclass(frozen=True, slots=True)
class FakeHandle:
    """What ``nvmlDeviceGetHandleByIndex`` returns."""

    index: int


@dataclass(frozen=True, slots=True)
class FakePciInfo:
    """The fields of ``nvmlPciInfo_t`` the agent reads."""

    busId: str  # noqa: N815 - pynvml's field name
    busIdLegacy: str  # noqa: N815 - pynvml's field name


class FakeNvml(FakeNvmlEvents):
    """A module-like object with pynvml's names, answering consistently with one document.

    Attributes:
        node: the synthesised details (bus ids, UUIDs, link layout, hidden PCIe levels).
        calls: how often each function was called.
        lost: GPUs that answer ``GPU_IS_LOST`` now.
    """

    NVMLError: type[Exception] = FakeNvmlError

    def __init__(
        self,
        document: TopologyDocument | None,
        *,
        init_error: int | None = None,
        lose_gpu: Mapping[int, str] | None = None,
        nvlink_unsupported: bool = False,
        mig_gpus: Iterable[int] = (),
        errors: Mapping[str, int] | None = None,
        xid_file: str | None = None,
    ) -> None:
        self.node: FakeNode = layout(document)
        self.calls: Counter[str] = Counter()
        self.lost: set[int] = set()
        self._document = document
        self._init_error = init_error
        self._lose_gpu = dict(lose_gpu or {})
        self._nvlink_unsupported = nvlink_unsupported
        self._mig = frozenset(mig_gpus)
        self._errors = dict(errors or {})
        self._sessions = 0
        self._events_init(xid_file)

    @property
    def sessions(self) -> int:
        """``nvmlInit`` calls not yet matched by ``nvmlShutdown`` (0 when the reader cleaned up)."""
        return self._sessions

    def nvmlInit(self) -> None:
        """Start a session, or raise ``init_error``."""
        self._enter("nvmlInit", needs_session=False)
        if self._init_error is not None:
            raise nvml_error(self._init_error)
        self._sessions += 1

    def nvmlShutdown(self) -> None:
        """End a session."""
        self._enter("nvmlShutdown")
        self._sessions -= 1

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs in the document (0 without one)."""
        self._enter("nvmlDeviceGetCount")
        return len(self.node.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        """A handle; ``INVALID_ARGUMENT`` past the last GPU."""
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.node.gpus):
            raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
        self._alive(index, "nvmlDeviceGetHandleByIndex")
        return FakeHandle(index)

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        """The document's UUID, or a synthesised one."""
        return self._gpu(handle, "nvmlDeviceGetUUID").uuid

    def nvmlDeviceGetPciInfo(self, handle: object) -> object:
        """``busId`` in NVML's long form, ``busIdLegacy`` in the short one."""
        bus = self._gpu(handle, "nvmlDeviceGetPciInfo").bus
        return FakePciInfo(busId=bus.canonical, busIdLegacy=bus.legacy)

    def nvmlDeviceGetNumaNodeId(self, handle: object) -> int:
        """The document's NUMA node; ``NOT_SUPPORTED`` when it has none."""
        return self._known(self._gpu(handle, "nvmlDeviceGetNumaNodeId").numa_node)

    def nvmlDeviceGetCpuAffinity(self, handle: object, cpu_set_size: int) -> object:
        """The document's cpulist as ``cpu_set_size`` 64-bit masks; ``NOT_SUPPORTED`` when it has none."""
        cpus = self._known(self._gpu(handle, "nvmlDeviceGetCpuAffinity").cpu_affinity)
        return mask_from_cpulist(cpus, cpu_set_size)

    def nvmlDeviceGetName(self, handle: object) -> str:
        """The document's model; ``NOT_SUPPORTED`` when it has none (real NVML always has one)."""
        self._gpu(handle, "nvmlDeviceGetName")
        return self._known(self._document.gpu_model if self._document else None)

    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]:
        """``divmod`` of the document's compute capability."""
        self._gpu(handle, "nvmlDeviceGetCudaComputeCapability")
        return divmod(self._known(self._document.compute_capability if self._document else None), 10)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: object) -> int:
        """The document's PCIe generation."""
        self._gpu(handle, "nvmlDeviceGetMaxPcieLinkGeneration")
        return self._known(self._document.pcie_gen if self._document else None)

    def nvmlDeviceGetMigMode(self, handle: object) -> object:
        """``[current, pending]``: enabled for ``mig_gpus``."""
        index = self._gpu(handle, "nvmlDeviceGetMigMode").index
        mode = self.NVML_DEVICE_MIG_ENABLE if index in self._mig else self.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetNvLinkState(self, handle: object, link: int) -> int:
        """Enabled for the links the layout connects, disabled for the GPU's spare slots."""
        active = self._link(handle, link, "nvmlDeviceGetNvLinkState").remote is not None
        return self.NVML_FEATURE_ENABLED if active else self.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkVersion(self, handle: object, link: int) -> int:
        """The ``NVML_NVLINK_VERSION_*`` of the document's NVLink generation."""
        self._link(handle, link, "nvmlDeviceGetNvLinkVersion")
        generation = self._document.nvlink_gen if self._document else None
        return self._known(nvml_version_value(self, generation) if generation else None)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: object, link: int) -> object:
        """The far end's address, in NVML's short lower-case spelling."""
        remote = self._known(self._link(handle, link, "nvmlDeviceGetNvLinkRemotePciInfo").remote)
        return FakePciInfo(busId=remote.legacy, busIdLegacy=remote.legacy)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: object, link: int) -> int:
        """GPU or switch, as the layout says."""
        found = self._link(handle, link, "nvmlDeviceGetNvLinkRemoteDeviceType")
        self._known(found.remote)
        return self.NVML_NVLINK_DEVICE_TYPE_SWITCH if found.to_switch else self.NVML_NVLINK_DEVICE_TYPE_GPU

    def nvmlDeviceGetTopologyCommonAncestor(self, first: object, second: object) -> int:
        """The pair's PCIe level (the document's, or the layout's guess where ``topo -m`` hid it)."""
        a = self._gpu(first, "nvmlDeviceGetTopologyCommonAncestor").index
        b = self._gpu(second, "nvmlDeviceGetTopologyCommonAncestor").index
        if a == b:
            raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
        return nvml_topology_value(self, self.pcie_level(a, b))

    def pcie_level(self, a: int, b: int) -> PcieLevel:
        """The level the fake reports for GPUs ``a`` and ``b``."""
        return self.node.levels[(a, b) if a < b else (b, a)]

    def _handle_of(self, index: int) -> object:
        return FakeHandle(index)

    def _index_of_handle(self, handle: object, call: str) -> int:
        return self._gpu(handle, call).index

    def _uuids(self) -> tuple[str, ...]:
        return tuple(gpu.uuid for gpu in self.node.gpus)

    def _error(self, code: int) -> Exception:
        return nvml_error(code)

    def _enter(self, call: str, *, needs_session: bool = True) -> None:
        self.calls[call] += 1
        if needs_session and self._sessions <= 0:
            raise nvml_error(self.NVML_ERROR_UNINITIALIZED)
        if call in self._errors:
            raise nvml_error(self._errors[call])

    def _alive(self, index: int, call: str) -> None:
        if index not in self.lost and self._lose_gpu.get(index) == call:
            self.lost.add(index)
        if index in self.lost:
            raise nvml_error(self.NVML_ERROR_GPU_IS_LOST)

    def _gpu(self, handle: object, call: str) -> FakeGpu:
        if not isinstance(handle, FakeHandle) or not 0 <= handle.index < len(self.node.gpus):
            raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
        self._enter(call)
        self._alive(handle.index, call)
        return self.node.gpus[handle.index]

    def _link(self, handle: object, link: int, call: str) -> FakeLink:
        gpu = self._gpu(handle, call)
        if self._nvlink_unsupported or not gpu.links:
            raise nvml_error(self.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(gpu.links):
            raise nvml_error(self.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.links[link]

    def _known(self, value: V | None) -> V:
        if value is None:
            raise nvml_error(self.NVML_ERROR_NOT_SUPPORTED)
        return value
