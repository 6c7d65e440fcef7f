"""GPU health from NVML events: a GPU that raises a critical Xid goes Unhealthy.

The same policy as NVIDIA's device plugin: register every GPU for the event types it supports among
critical Xid errors and single/double-bit ECC errors, wait for events in 5-second slices, and mark the
GPU of a critical Xid unhealthy unless the Xid is an application error the GPU survives (13 graphics
engine exception, 31 memory page fault, 43 GPU stopped processing, 45 preemptive cleanup, 68 video
processor exception, 109 context switch timeout). An event naming no GPU of this node is ignored; a
failing wait marks every GPU unhealthy (the driver is in trouble), as NVIDIA's plugin does. Health is
never restored here: that takes a GPU reset, after which the agent restarts with a fresh table.

The module is taken as a parameter, so the real ``pynvml`` and :class:`nodeagent.fake_nvml.FakeNvml`
(whose events come from its ``inject_xid`` or a file) are interchangeable.
"""

# ruff: noqa: N802, N815 - the protocol's members are pynvml's own camelCase names

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from nodeagent.nvml_api import error_code, error_name

APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""Xids of application errors: the GPU stays healthy (NVIDIA's plugin ignores the same ones)."""

WAIT_MS = 5000


class NvmlEvents(Protocol):
    """The slice of ``pynvml`` the watcher uses."""

    NVMLError: type[Exception]
    NVML_ERROR_TIMEOUT: int
    NVML_ERROR_NOT_SUPPORTED: int
    nvmlEventTypeXidCriticalError: int
    nvmlEventTypeDoubleBitEccError: int
    nvmlEventTypeSingleBitEccError: int

    def nvmlInit(self) -> None:
        """Attach to the driver."""

    def nvmlShutdown(self) -> None:
        """Detach."""

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object:
        """The handle of a GPU."""
        ...

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        """The UUID of a handle."""
        ...

    def nvmlDeviceGetSupportedEventTypes(self, handle: object) -> int:
        """A bit mask of the event types the GPU can raise."""
        ...

    def nvmlEventSetCreate(self) -> object:
        """A new event set."""
        ...

    def nvmlDeviceRegisterEvents(self, handle: object, event_types: int, event_set: object) -> None:
        """Deliver the GPU's events of these types to the set."""

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> object:
        """The next event (``device``, ``eventType``, ``eventData``); raises TIMEOUT when none came."""
        ...

    def nvmlEventSetFree(self, event_set: object) -> None:
        """Release the set."""


class HealthWatcher:
    """Turns NVML events into :meth:`on_unhealthy` calls, in a thread of its own."""

    def __init__(
        self,
        nvml: NvmlEvents,
        uuids: Iterable[str],
        on_unhealthy: Callable[[str, str], None],
        *,
        wait_ms: int = WAIT_MS,
        log: logging.Logger | None = None,
    ) -> None:
        """Watch the GPUs ``uuids``; ``on_unhealthy(uuid, reason)`` is called for each GPU that fails.

        ``wait_ms`` is one wait for events, also the longest a stop waits.
        """
        self._nvml = nvml
        self._wait_ms = wait_ms
        self._uuids = tuple(uuids)
        self._on_unhealthy = on_unhealthy
        self._log = log or logging.getLogger(__name__)

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop``; never raises. Without event support, health checks are off (logged)."""
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            self._log.warning("NVML cannot start (%s): GPU health checks are off", error_name(exc))
            return
        try:
            event_set = self._register()
            if event_set is None:
                return
            try:
                self._watch(event_set, stop)
            finally:
                self._quietly(lambda: nvml.nvmlEventSetFree(event_set))
        finally:
            self._quietly(nvml.nvmlShutdown)

    def _register(self) -> object | None:
        nvml = self._nvml
        wanted = (
            nvml.nvmlEventTypeXidCriticalError
            | nvml.nvmlEventTypeDoubleBitEccError
            | nvml.nvmlEventTypeSingleBitEccError
        )
        try:
            event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            self._log.warning("NVML events unavailable (%s): GPU health checks are off", error_name(exc))
            return None
        for uuid in self._uuids:
            try:
                handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                supported = nvml.nvmlDeviceGetSupportedEventTypes(handle)
                nvml.nvmlDeviceRegisterEvents(handle, wanted & supported, event_set)
            except nvml.NVMLError as exc:
                if error_code(exc) == nvml.NVML_ERROR_NOT_SUPPORTED:
                    self._log.warning("GPU %s is too old for health events; it is not watched", uuid)
                    continue
                self._on_unhealthy(uuid, f"its NVML events cannot be watched ({error_name(exc)})")
        self._log.info("watching %d GPUs for critical Xid errors", len(self._uuids))
        return event_set

    def _watch(self, event_set: object, stop: threading.Event) -> None:
        nvml = self._nvml
        while not stop.is_set():
            try:
                event = nvml.nvmlEventSetWait_v2(event_set, self._wait_ms)
            except nvml.NVMLError as exc:
                if error_code(exc) == nvml.NVML_ERROR_TIMEOUT:
                    continue
                for uuid in self._uuids:
                    self._on_unhealthy(uuid, f"waiting for NVML events failed ({error_name(exc)})")
                stop.wait(self._wait_ms / 1000)
                continue
            self._handle(event)

    def _handle(self, event: object) -> None:
        nvml = self._nvml
        kind = int(getattr(event, "eventType", 0))
        xid = int(getattr(event, "eventData", 0))
        if kind != nvml.nvmlEventTypeXidCriticalError:
            self._log.info("NVML event %#x (data %d) is no critical Xid; ignored", kind, xid)
            return
        if xid in APPLICATION_XIDS:
            self._log.info("Xid %d is an application error; the GPU stays healthy", xid)
            return
        try:
            uuid = nvml.nvmlDeviceGetUUID(getattr(event, "device", None))
        except nvml.NVMLError as exc:
            for each in self._uuids:
                self._on_unhealthy(each, f"Xid {xid} on a GPU NVML cannot name ({error_name(exc)})")
            return
        if uuid not in self._uuids:
            self._log.info("Xid %d on %s, which is not one of this node's GPUs; ignored", xid, uuid)
            return
        self._on_unhealthy(uuid, f"critical Xid {xid}")

    def _quietly(self, call: Callable[[], None]) -> None:
        try:
            call()
        except self._nvml.NVMLError as exc:
            self._log.warning("NVML cleanup failed: %s", error_name(exc))
