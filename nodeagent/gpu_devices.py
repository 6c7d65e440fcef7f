"""The node's GPUs as the device plugin advertises them: index, device ID (the NVML UUID), NUMA node, health.

Device IDs are GPU UUIDs, as NVIDIA's device plugin advertises them by default, so the container stack
(``NVIDIA_VISIBLE_DEVICES``) and the kubelet's PodResources report name the same GPUs whichever plugin
serves the node. phalanx thinks in NVML indices (``phalanx.io/gpus``); this table translates both ways.
An ID that is a plain index (NVIDIA's plugin with ``deviceIDStrategy: index``) is read as that index.

Health only goes one way, Healthy to Unhealthy, as in NVIDIA's plugin: a GPU that raised a critical Xid
needs a reset or a reboot, after which the agent (and its table) start afresh. Watchers (the plugin's
``ListAndWatch`` streams) wait for a change with :meth:`GpuDevices.wait_change`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scheduling.topology import TopologyDocument


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU: its NVML index, its UUID (the device ID) and its NUMA node, when known."""

    index: int
    uuid: str
    numa_node: int | None = None


class GpuDevices:
    """The GPU table and the health of each GPU; thread-safe."""

    def __init__(self, devices: Sequence[GpuDevice]) -> None:
        self._devices = tuple(sorted(devices, key=lambda d: d.index))
        self._by_id = {d.uuid: d for d in self._devices}
        self._by_index = {d.index: d for d in self._devices}
        self._unhealthy: dict[int, str] = {}
        self._version = 0
        self._changed = threading.Condition()

    @classmethod
    def from_document(cls, document: TopologyDocument) -> GpuDevices:
        """The GPUs of a topology read through NVML; a GPU without a UUID (lost) is left out."""
        return cls([GpuDevice(g.index, g.uuid, g.numa_node) for g in document.gpus if g.uuid])

    @property
    def devices(self) -> tuple[GpuDevice, ...]:
        """Every GPU, by index."""
        return self._devices

    def index_of(self, device_id: str) -> int | None:
        """The index of a device ID (a UUID of this node, or a plain index); ``None`` for anything else."""
        device = self._by_id.get(device_id)
        if device is not None:
            return device.index
        if device_id.isdecimal() and int(device_id) in self._by_index:
            return int(device_id)
        return None

    def id_of(self, index: int) -> str:
        """The device ID of GPU ``index``; raises ``KeyError`` for an index the node lacks."""
        return self._by_index[index].uuid

    def to_indices(self, device_ids: Iterable[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
        """The indices of ``device_ids`` (sorted, without repeats) and the IDs that are no GPU here."""
        indices: set[int] = set()
        unknown: list[str] = []
        for device_id in device_ids:
            index = self.index_of(device_id)
            if index is None:
                unknown.append(device_id)
            else:
                indices.add(index)
        return tuple(sorted(indices)), tuple(sorted(set(unknown)))

    def mark_unhealthy(self, index: int, reason: str) -> bool:
        """Mark GPU ``index`` unhealthy; ``True`` when that changed anything (it was healthy)."""
        with self._changed:
            if index not in self._by_index or index in self._unhealthy:
                return False
            self._unhealthy[index] = reason
            self._version += 1
            self._changed.notify_all()
            return True

    def unhealthy(self) -> Mapping[int, str]:
        """Unhealthy GPU index -> why."""
        with self._changed:
            return MappingProxyType(dict(self._unhealthy))

    def healthy(self, index: int) -> bool:
        """Whether GPU ``index`` exists and is healthy."""
        with self._changed:
            return index in self._by_index and index not in self._unhealthy

    @property
    def version(self) -> int:
        """Grows with every health change."""
        with self._changed:
            return self._version

    def wait_change(self, seen: int, timeout: float) -> int:
        """Wait until the version differs from ``seen`` or ``timeout`` passes; return the version."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != seen, timeout)
            return self._version
