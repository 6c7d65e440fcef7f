"""A ``coordination.k8s.io/v1`` Lease, read and written with optimistic concurrency.

Every write names the ``resourceVersion`` it read, so of two candidates writing at once one gets a
conflict and stays a candidate (``scheduling.leadership`` decides what to write).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from kubeio.errors import ConflictError, NotFoundError
from kubeio.http import JsonObject, KubeHttp
from scheduling.leadership import LeaseRecord


def micro_time(seconds: float) -> str:
    """RFC 3339 with microseconds, as the API's ``MicroTime`` fields are written.

    >>> micro_time(0.5)
    '1970-01-01T00:00:00.500000Z'
    """
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_record(raw: JsonObject) -> LeaseRecord:
    """The parts of a Lease leadership looks at (a field of the wrong type reads as absent)."""
    spec = raw.get("spec") or {}
    duration, transitions = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        duration_seconds=duration if isinstance(duration, int) and duration > 0 else 15,
        transitions=transitions if isinstance(transitions, int) else 0,
        version=str((raw.get("metadata") or {}).get("resourceVersion") or ""),
    )


class LeaseClient:
    """Reads and writes one Lease."""

    def __init__(
        self,
        http: KubeHttp,
        namespace: str,
        name: str,
        *,
        wall_clock: Callable[[], float],
        timeout: float = 5.0,
    ) -> None:
        self._http = http
        self._namespace = namespace
        self._name = name
        self._wall = wall_clock
        self._timeout = timeout
        self._raw: JsonObject | None = None

    @property
    def _path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self._namespace}/leases/{self._name}"

    def read(self) -> LeaseRecord | None:
        """The Lease now, or ``None`` if there is none.

        Raises:
            KubeError: the API server failed.
        """
        try:
            self._raw = self._http.request("GET", self._path, timeout=self._timeout)
        except NotFoundError:
            self._raw = None
            return None
        return lease_record(self._raw)

    def create(self, holder: str, duration_seconds: int) -> bool:
        """Create the Lease held by ``holder``; ``False`` if another created it first.

        Raises:
            KubeError: the API server failed otherwise.
        """
        now = micro_time(self._wall())
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self._name, "namespace": self._namespace},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": duration_seconds,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self._namespace}/leases"
        try:
            self._raw = self._http.request("POST", path, body=body, timeout=self._timeout)
        except ConflictError:  # 409 AlreadyExists: another candidate was first
            return False
        return True

    def write(self, holder: str, duration_seconds: int, *, taking: bool) -> bool:
        """Renew (``taking=False``) or take over the Lease last read; ``False`` if it changed since.

        Raises:
            KubeError: the API server failed otherwise.
        """
        if self._raw is None:
            return False
        raw = dict(self._raw)
        spec = dict(raw.get("spec") or {})
        now = micro_time(self._wall())
        spec.update(holderIdentity=holder, leaseDurationSeconds=duration_seconds, renewTime=now)
        if taking:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = lease_record(self._raw).transitions + 1
        raw["spec"] = spec
        try:
            self._raw = self._http.request("PUT", self._path, body=raw, timeout=self._timeout)
        except ConflictError:  # 409: written since we read it
            return False
        return True

    def release(self, holder: str) -> None:
        """Give the Lease up at a clean stop, so a standby takes over at once (if ``holder`` holds it).

        Raises:
            KubeError: the API server failed.
        """
        record = self.read()
        if record is None or record.holder != holder or self._raw is None:
            return
        raw = dict(self._raw)
        raw["spec"] = {**(raw.get("spec") or {}), "holderIdentity": "", "renewTime": micro_time(self._wall())}
        try:
            self._http.request("PUT", self._path, body=raw, timeout=self._timeout)
        except ConflictError:
            return
