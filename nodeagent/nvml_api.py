"""The slice of the ``pynvml`` module the node agent uses, and how its answers and errors are read.

The reader takes the module as a parameter instead of importing it, so the real ``pynvml`` (from the
``nvidia-ml-py`` package) and :class:`nodeagent.fake_nvml.FakeNvml` are interchangeable:
:class:`NvmlModule` lists every name the reader touches, which is also the contract the fake keeps.
Names and values follow ``pynvml`` 13.615 (docs/design/nvlink-topology.md §2). Constants are read from the
module, never hard-coded, so a future ``pynvml`` with more link slots is picked up as is.

Errors: ``pynvml`` raises one ``NVMLError`` subclass per ``NVML_ERROR_*`` code and keeps the code in
``.value`` (§2.4); the reader catches ``nvml.NVMLError`` and decides by that code, which works the same
for the real classes and the fake's.
"""

# ruff: noqa: N802 - the members are pynvml's own camelCase names

from __future__ import annotations

from typing import Protocol

from scheduling.topology import PcieLevel


class NvmlModule(Protocol):
    """What the reader needs from ``pynvml``: exception base class, constants and functions."""

    NVMLError: type[Exception]
    NVML_ERROR_UNINITIALIZED: int
    NVML_ERROR_INVALID_ARGUMENT: int
    NVML_ERROR_NOT_SUPPORTED: int
    NVML_ERROR_NO_PERMISSION: int
    NVML_ERROR_DRIVER_NOT_LOADED: int
    NVML_ERROR_LIBRARY_NOT_FOUND: int
    NVML_ERROR_FUNCTION_NOT_FOUND: int
    NVML_ERROR_GPU_IS_LOST: int
    NVML_ERROR_RESET_REQUIRED: int
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: int
    NVML_NVLINK_MAX_LINKS: int
    NVML_FEATURE_ENABLED: int
    NVML_DEVICE_MIG_ENABLE: int
    NVML_NVLINK_DEVICE_TYPE_GPU: int
    NVML_NVLINK_DEVICE_TYPE_IBMNPU: int
    NVML_NVLINK_DEVICE_TYPE_SWITCH: int
    NVML_TOPOLOGY_INTERNAL: int
    NVML_TOPOLOGY_SINGLE: int
    NVML_TOPOLOGY_MULTIPLE: int
    NVML_TOPOLOGY_HOSTBRIDGE: int
    NVML_TOPOLOGY_NODE: int
    NVML_TOPOLOGY_SYSTEM: int
    NVML_NVLINK_VERSION_1_0: int
    NVML_NVLINK_VERSION_2_0: int
    NVML_NVLINK_VERSION_2_2: int
    NVML_NVLINK_VERSION_3_0: int
    NVML_NVLINK_VERSION_3_1: int
    NVML_NVLINK_VERSION_4_0: int
    NVML_NVLINK_VERSION_5_0: int
    NVML_NVLINK_VERSION_6_0: int

    def nvmlInit(self) -> None:
        """Load the library and attach to the driver."""

    def nvmlShutdown(self) -> None:
        """Release what ``nvmlInit`` took."""

    def nvmlDeviceGetCount(self) -> int:
        """Number of GPUs (``nvmlDeviceGetCount_v2``); MIG instances are not counted."""
        ...

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        """The full-GPU (parent) handle of NVML index ``index``."""
        ...

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        """``GPU-...``."""
        ...

    def nvmlDeviceGetPciInfo(self, handle: object) -> object:
        """An ``nvmlPciInfo_t`` with ``busId`` / ``busIdLegacy``."""
        ...

    def nvmlDeviceGetNumaNodeId(self, handle: object) -> int:
        """NUMA node nearest the GPU."""
        ...

    def nvmlDeviceGetCpuAffinity(self, handle: object, cpu_set_size: int) -> object:
        """An array of ``cpu_set_size`` 64-bit CPU masks."""
        ...

    def nvmlDeviceGetName(self, handle: object) -> str:
        """Model name, e.g. ``NVIDIA A100-SXM4-40GB``."""
        ...

    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]:
        """``(major, minor)``."""
        ...

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: object) -> int:
        """Highest PCIe generation the GPU's link can run at in this system."""
        ...

    def nvmlDeviceGetMigMode(self, handle: object) -> object:
        """``[current, pending]`` MIG mode."""
        ...

    def nvmlDeviceGetNvLinkState(self, handle: object, link: int) -> int:
        """``NVML_FEATURE_ENABLED`` when link ``link`` is up."""
        ...

    def nvmlDeviceGetNvLinkVersion(self, handle: object, link: int) -> int:
        """An ``NVML_NVLINK_VERSION_*`` enum value, not the generation number."""
        ...

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: object, link: int) -> object:
        """The ``nvmlPciInfo_t`` of the link's far end (C symbol ``..._v2``)."""
        ...

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: object, link: int) -> int:
        """``NVML_NVLINK_DEVICE_TYPE_*`` of the far end: the NVSwitch detector."""
        ...

    def nvmlDeviceGetTopologyCommonAncestor(self, first: object, second: object) -> int:
        """``NVML_TOPOLOGY_*`` level of the deepest PCIe ancestor two GPUs share."""
        ...


def error_code(exc: BaseException) -> int | None:
    """The ``NVML_ERROR_*`` code an ``NVMLError`` carries in ``.value``."""
    code = getattr(exc, "value", None)
    return code if isinstance(code, int) else None


def error_name(exc: BaseException) -> str:
    """A log-friendly name: the exception class (``NVMLError_GpuIsLost``) and its code."""
    return f"{type(exc).__name__}({error_code(exc)})"


def unavailable_codes(nvml: NvmlModule) -> frozenset[int]:
    """Codes of ``nvmlInit`` meaning "no usable driver here (yet)": retry later, never crash."""
    return frozenset(
        {
            nvml.NVML_ERROR_LIBRARY_NOT_FOUND,
            nvml.NVML_ERROR_DRIVER_NOT_LOADED,
            nvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            nvml.NVML_ERROR_NO_PERMISSION,
        }
    )


def absent_codes(nvml: NvmlModule) -> frozenset[int]:
    """Codes meaning "this fact does not exist here": the call or feature is not supported."""
    return frozenset({nvml.NVML_ERROR_NOT_SUPPORTED, nvml.NVML_ERROR_FUNCTION_NOT_FOUND})


def absent_link_codes(nvml: NvmlModule) -> frozenset[int]:
    """Codes meaning "no such NVLink": NOT_SUPPORTED or INVALID_ARGUMENT, as go-gpuallocator (§2.4)."""
    return absent_codes(nvml) | {nvml.NVML_ERROR_INVALID_ARGUMENT}


def gpu_gone_codes(nvml: NvmlModule) -> frozenset[int]:
    """Codes meaning "this one GPU cannot answer any more": it is left out, the others are read."""
    return frozenset({nvml.NVML_ERROR_GPU_IS_LOST, nvml.NVML_ERROR_RESET_REQUIRED})


def pcie_level(nvml: NvmlModule, value: int) -> PcieLevel | None:
    """The document's level for an ``NVML_TOPOLOGY_*`` value (docs/design/nvlink-topology.md §2.2).

    ``NVML_TOPOLOGY_INTERNAL`` (two GPUs on one board, e.g. K80) has no ``topo -m`` label; it is at least
    as close as ``PIX``, so it is recorded as ``PIX``. An unknown value gives ``None`` (pair unknown).
    """
    levels = {
        nvml.NVML_TOPOLOGY_INTERNAL: PcieLevel.PIX,
        nvml.NVML_TOPOLOGY_SINGLE: PcieLevel.PIX,
        nvml.NVML_TOPOLOGY_MULTIPLE: PcieLevel.PXB,
        nvml.NVML_TOPOLOGY_HOSTBRIDGE: PcieLevel.PHB,
        nvml.NVML_TOPOLOGY_NODE: PcieLevel.NODE,
        nvml.NVML_TOPOLOGY_SYSTEM: PcieLevel.SYS,
    }
    return levels.get(value)


def nvml_topology_value(nvml: NvmlModule, level: PcieLevel) -> int:
    """The ``NVML_TOPOLOGY_*`` value ``nvmlDeviceGetTopologyCommonAncestor`` returns for ``level``."""
    values = {
        PcieLevel.PIX: nvml.NVML_TOPOLOGY_SINGLE,
        PcieLevel.PXB: nvml.NVML_TOPOLOGY_MULTIPLE,
        PcieLevel.PHB: nvml.NVML_TOPOLOGY_HOSTBRIDGE,
        PcieLevel.NODE: nvml.NVML_TOPOLOGY_NODE,
        PcieLevel.SYS: nvml.NVML_TOPOLOGY_SYSTEM,
    }
    return values[level]


def nvlink_generation(nvml: NvmlModule, version: int) -> int | None:
    """The NVLink generation of an ``NVML_NVLINK_VERSION_*`` value (2.2 is generation 2, 3.1 is 3).

    ``nvmlDeviceGetNvLinkVersion`` returns an enum, not the generation (§2.3); ``None`` for
    ``NVML_NVLINK_VERSION_INVALID`` and values this table does not know.
    """
    generations = {
        nvml.NVML_NVLINK_VERSION_1_0: 1,
        nvml.NVML_NVLINK_VERSION_2_0: 2,
        nvml.NVML_NVLINK_VERSION_2_2: 2,
        nvml.NVML_NVLINK_VERSION_3_0: 3,
        nvml.NVML_NVLINK_VERSION_3_1: 3,
        nvml.NVML_NVLINK_VERSION_4_0: 4,
        nvml.NVML_NVLINK_VERSION_5_0: 5,
        nvml.NVML_NVLINK_VERSION_6_0: 6,
    }
    return generations.get(version)


def nvml_version_value(nvml: NvmlModule, generation: int) -> int | None:
    """The ``NVML_NVLINK_VERSION_*`` value a GPU of NVLink ``generation`` reports (the ``x.0`` one)."""
    values = {
        1: nvml.NVML_NVLINK_VERSION_1_0,
        2: nvml.NVML_NVLINK_VERSION_2_0,
        3: nvml.NVML_NVLINK_VERSION_3_0,
        4: nvml.NVML_NVLINK_VERSION_4_0,
        5: nvml.NVML_NVLINK_VERSION_5_0,
        6: nvml.NVML_NVLINK_VERSION_6_0,
    }
    return values.get(generation)
