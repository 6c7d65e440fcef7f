"""NVML's constant values, for the fake (the reader always reads them from the module it is given).

The values are NVML's C ABI (``nvml.h``) as ``pynvml`` 13.615 defines them; they do not change between
driver releases, only new ones are added. ``NVML_NVLINK_MAX_LINKS`` is 36 in that release.
"""

from __future__ import annotations

ERROR_CLASS_NAMES = {
    1: "Uninitialized",
    2: "InvalidArgument",
    3: "NotSupported",
    4: "NoPermission",
    6: "NotFound",
    9: "DriverNotLoaded",
    10: "Timeout",
    12: "LibraryNotFound",
    13: "FunctionNotFound",
    15: "GpuIsLost",
    16: "ResetRequired",
    18: "LibRmVersionMismatch",
    999: "Unknown",
}
"""``NVML_ERROR_*`` codes and the suffix of pynvml's exception class for each (``NVMLError_<suffix>``)."""

ERROR_NAMES = {
    1: "Uninitialized",
    2: "Invalid Argument",
    3: "Not Supported",
    4: "Insufficient Permissions",
    6: "Not Found",
    9: "Driver Not Loaded",
    10: "Timeout",
    12: "NVML Shared Library Not Found",
    13: "Function Not Found",
    15: "GPU is lost",
    16: "GPU requires restart",
    18: "RM has detected an NVML/RM version mismatch.",
    999: "Unknown Error",
}
"""The message pynvml's ``str(error)`` gives for each code."""


class NvmlConstants:
    """The ``NVML_*`` names :class:`nodeagent.nvml_api.NvmlModule` lists, with NVML's values."""

    NVML_ERROR_UNINITIALIZED: int = 1
    NVML_ERROR_INVALID_ARGUMENT: int = 2
    NVML_ERROR_NOT_SUPPORTED: int = 3
    NVML_ERROR_NO_PERMISSION: int = 4
    NVML_ERROR_NOT_FOUND: int = 6
    NVML_ERROR_DRIVER_NOT_LOADED: int = 9
    NVML_ERROR_LIBRARY_NOT_FOUND: int = 12
    NVML_ERROR_FUNCTION_NOT_FOUND: int = 13
    NVML_ERROR_GPU_IS_LOST: int = 15
    NVML_ERROR_RESET_REQUIRED: int = 16
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: int = 18
    NVML_ERROR_UNKNOWN: int = 999

    NVML_NVLINK_MAX_LINKS: int = 36
    NVML_FEATURE_DISABLED: int = 0
    NVML_FEATURE_ENABLED: int = 1
    NVML_DEVICE_MIG_DISABLE: int = 0
    NVML_DEVICE_MIG_ENABLE: int = 1

    NVML_NVLINK_DEVICE_TYPE_GPU: int = 0
    NVML_NVLINK_DEVICE_TYPE_IBMNPU: int = 1
    NVML_NVLINK_DEVICE_TYPE_SWITCH: int = 2
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN: int = 0xFF

    NVML_TOPOLOGY_INTERNAL: int = 0
    NVML_TOPOLOGY_SINGLE: int = 10
    NVML_TOPOLOGY_MULTIPLE: int = 20
    NVML_TOPOLOGY_HOSTBRIDGE: int = 30
    NVML_TOPOLOGY_NODE: int = 40
    NVML_TOPOLOGY_SYSTEM: int = 50

    NVML_NVLINK_VERSION_INVALID: int = 0
    NVML_NVLINK_VERSION_1_0: int = 1
    NVML_NVLINK_VERSION_2_0: int = 2
    NVML_NVLINK_VERSION_2_2: int = 3
    NVML_NVLINK_VERSION_3_0: int = 4
    NVML_NVLINK_VERSION_3_1: int = 5
    NVML_NVLINK_VERSION_4_0: int = 6
    NVML_NVLINK_VERSION_5_0: int = 7
    NVML_NVLINK_VERSION_6_0: int = 8

    NVML_ERROR_TIMEOUT: int = 10

    nvmlEventTypeSingleBitEccError: int = 0x1  # noqa: N815 - pynvml's name
    nvmlEventTypeDoubleBitEccError: int = 0x2  # noqa: N815 - pynvml's name
    nvmlEventTypeXidCriticalError: int = 0x8  # noqa: N815 - pynvml's name
