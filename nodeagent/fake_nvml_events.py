"""NVML's event API for :class:`nodeagent.fake_nvml.FakeNvml`: Xid errors on demand.

A test calls :meth:`FakeNvmlEvents.inject_xid`; a node agent run with ``--fake-topology`` on a machine
without GPUs (the test bed) gets its events from a file instead (``--fake-xid-file``): each line
``<gpu index> <xid>`` appended to it is delivered once, as NVML would deliver a critical Xid on that GPU.
Waiting follows pynvml: ``nvmlEventSetWait_v2`` returns an event record or raises ``NVML_ERROR_TIMEOUT``.
"""

# ruff: noqa: N802 - the methods carry pynvml's own camelCase names

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from nodeagent.nvml_constants import NvmlConstants


@dataclass(frozen=True, slots=True)
class FakeEvent:
    """What ``nvmlEventSetWait_v2`` returns (``c_nvmlEventData_t``'s fields)."""

    device: object
    eventType: int  # noqa: N815 - pynvml's field name
    eventData: int  # noqa: N815 - pynvml's field name
    gpuInstanceId: int = 0xFFFFFFFF  # noqa: N815 - pynvml's field name
    computeInstanceId: int = 0xFFFFFFFF  # noqa: N815 - pynvml's field name


class FakeEventSet:
    """An event set: the GPUs registered in it and the events waiting."""

    def __init__(self) -> None:
        self.registered: dict[int, int] = {}
        self.pending: queue.Queue[FakeEvent] = queue.Queue()


class FakeNvmlEvents(NvmlConstants):
    """The event half of the fake; :class:`~nodeagent.fake_nvml.FakeNvml` builds on it and gives the hooks."""

    def _events_init(self, xid_file: str | None) -> None:
        self._event_sets: list[FakeEventSet] = []
        self._event_lock = threading.Lock()
        self._xid_file = Path(xid_file) if xid_file else None
        self._xid_offset = 0

    def _handle_of(self, index: int) -> object:
        raise NotImplementedError

    def _index_of_handle(self, handle: object, call: str) -> int:
        raise NotImplementedError

    def _uuids(self) -> tuple[str, ...]:
        raise NotImplementedError

    def _error(self, code: int) -> Exception:
        raise NotImplementedError

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object:
        """The handle of the GPU with this UUID; ``INVALID_ARGUMENT`` for any other."""
        uuids = self._uuids()
        if uuid not in uuids:
            raise self._error(self.NVML_ERROR_INVALID_ARGUMENT)
        return self._handle_of(uuids.index(uuid))

    def nvmlDeviceGetSupportedEventTypes(self, handle: object) -> int:
        """Critical Xids and ECC errors, as on a data-centre GPU."""
        self._index_of_handle(handle, "nvmlDeviceGetSupportedEventTypes")
        return (
            self.nvmlEventTypeXidCriticalError
            | self.nvmlEventTypeDoubleBitEccError
            | self.nvmlEventTypeSingleBitEccError
        )

    def nvmlEventSetCreate(self) -> object:
        """A new, empty event set."""
        event_set = FakeEventSet()
        with self._event_lock:
            self._event_sets.append(event_set)
        return event_set

    def nvmlDeviceRegisterEvents(self, handle: object, event_types: int, event_set: object) -> None:
        """Deliver this GPU's events of ``event_types`` to ``event_set``."""
        index = self._index_of_handle(handle, "nvmlDeviceRegisterEvents")
        if not isinstance(event_set, FakeEventSet):
            raise self._error(self.NVML_ERROR_INVALID_ARGUMENT)
        event_set.registered[index] = event_set.registered.get(index, 0) | event_types

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> object:
        """The next event, or ``NVML_ERROR_TIMEOUT`` after ``timeout_ms`` (the file is read meanwhile)."""
        if not isinstance(event_set, FakeEventSet):
            raise self._error(self.NVML_ERROR_INVALID_ARGUMENT)
        slices = max(1, timeout_ms // 100)
        for _ in range(slices):
            self._read_xid_file()
            try:
                return event_set.pending.get(timeout=min(timeout_ms, 100) / 1000)
            except queue.Empty:
                continue
        raise self._error(self.NVML_ERROR_TIMEOUT)

    def nvmlEventSetFree(self, event_set: object) -> None:
        """Forget the set."""
        with self._event_lock:
            self._event_sets = [s for s in self._event_sets if s is not event_set]

    def inject_xid(self, index: int, xid: int) -> None:
        """Raise Xid ``xid`` on GPU ``index``: every set it is registered in gets the event."""
        kind = self.nvmlEventTypeXidCriticalError
        with self._event_lock:
            sets = list(self._event_sets)
        for event_set in sets:
            if event_set.registered.get(index, 0) & kind:
                event_set.pending.put(FakeEvent(self._handle_of(index), kind, xid))

    def _read_xid_file(self) -> None:
        if self._xid_file is None:
            return
        try:
            with self._xid_file.open("rb") as handle:
                handle.seek(self._xid_offset)
                data = handle.read()
        except OSError:
            return
        complete = data[: data.rfind(b"\n") + 1]
        self._xid_offset += len(complete)
        for line in complete.decode(errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0].isdecimal() and parts[1].isdecimal():
                self.inject_xid(int(parts[0]), int(parts[1]))
