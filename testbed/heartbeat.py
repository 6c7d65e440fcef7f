"""The simulated kubelet's heartbeats: each node's Lease renewed, its ``Ready`` condition posted.

A real kubelet proves it is alive in two ways the node lifecycle controller reads: it renews its node's
Lease in ``kube-node-lease`` every quarter of the Lease's duration, and it posts the node's ``Ready``
condition (with ``lastHeartbeatTime``) whenever the condition changes and at least every
``nodeStatusReportFrequency`` (5 minutes). A node whose Lease is not renewed for the controller's
``--node-monitor-grace-period`` is marked ``Ready=Unknown`` and tainted ``node.kubernetes.io/unreachable``,
and the taint eviction controller then evicts its pods after their ``tolerationSeconds``. This module
does the kubelet's part for every simulated node, so that only a node whose kubelet a test stopped dies.

A test stops or degrades one node's kubelet with the annotation ``phalanx.io/sim-kubelet``
(``testbed.nodes.set_ready``): ``stopped`` (no Lease renewal, no status: the node dies as a real one
does), ``not-ready`` (alive, but it reports ``Ready=False``); without it the kubelet runs and reports
``Ready=True``.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject, KubeHttp

log = logging.getLogger(__name__)

SIMULATED_LABEL = "phalanx.io/simulated"
"""The label that makes a node the simulated kubelet's own."""

KUBELET_ANNOTATION = "phalanx.io/sim-kubelet"
"""How a test stops (``stopped``) or degrades (``not-ready``) one node's simulated kubelet."""

STOPPED = "stopped"
NOT_READY = "not-ready"

NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

BEAT_TICK_SECONDS = 1.0
"""The longest wait between two beats. A beat renews only the Leases that are due, and each node's fall
due at its own phase of the period (``_phase``), so renewals come a few at a time rather than all at once.

Nodes registered together (a test bed's, a benchmark's thousands) would otherwise keep renewing together:
every node's Lease in one burst each period, a burst of thousands of writes that loads the API server
for seconds, inside some measurement windows and not others. Real kubelets start at different moments;
this spreads the simulated ones as if they had."""

STATUS_REPORT_SECONDS = 300.0
"""A node's status is posted at least this often even when nothing changed: the kubelet's default
``nodeStatusReportFrequency``. The Lease is what the node lifecycle controller watches between."""

READY_STATES: Mapping[str, tuple[str, str]] = MappingProxyType(
    {
        "True": ("KubeletReady", "simulated kubelet is posting ready status"),
        "False": ("KubeletNotReady", "simulated kubelet reports the node not ready"),
        "Unknown": ("NodeStatusUnknown", "Kubelet stopped posting node status."),
    }
)
"""The ``Ready`` condition's reason and message per status: ``True`` and ``False`` as a kubelet posts
them, ``Unknown`` as the node lifecycle controller writes it once a kubelet stopped posting."""


def node_is_simulated(node: JsonObject) -> bool:
    """Whether ``node`` is one of the test bed's simulated nodes (label ``phalanx.io/simulated=true``)."""
    return ((node.get("metadata") or {}).get("labels") or {}).get(SIMULATED_LABEL) == "true"


def kubelet_state(node: JsonObject) -> str | None:
    """``running``, ``not-ready`` or ``stopped`` for a simulated node; ``None`` for any other node."""
    if not node_is_simulated(node):
        return None
    state = ((node.get("metadata") or {}).get("annotations") or {}).get(KUBELET_ANNOTATION)
    return state if state in (STOPPED, NOT_READY) else "running"


def ready_status(node: JsonObject) -> str:
    """The status of the node's ``Ready`` condition (``Unknown`` when it has none)."""
    conditions: list[Any] = (node.get("status") or {}).get("conditions") or []
    for condition in conditions:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return "Unknown"


def ready_condition(status: str, now: str, *, transition: str | None = None) -> JsonObject:
    """The ``Ready`` condition as a kubelet (``True``, ``False``) or the lifecycle controller writes it.

    ``transition`` keeps the time of the last change when the status did not change.
    """
    reason, message = READY_STATES[status]
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": now,
        "lastTransitionTime": transition or now,
    }


@dataclass(slots=True)
class _Beat:
    """What the heartbeat knows of one simulated node."""

    uid: str
    state: str
    ready: str
    transition: str | None
    posted: float = float("-inf")
    renewed: float = float("-inf")

    @property
    def want(self) -> str:
        """The ``Ready`` status its kubelet reports."""
        return "False" if self.state == NOT_READY else "True"


class NodeHeartbeat:
    """Renews every live simulated node's Lease and posts its ``Ready`` condition, from one thread."""

    def __init__(self, http: KubeHttp, *, clock: Callable[[], float], lease_seconds: int) -> None:
        self._http = http
        self._clock = clock
        self._lease_seconds = lease_seconds
        self._lock = threading.Lock()
        self._nodes: dict[str, _Beat] = {}
        self._wake = threading.Event()

    @property
    def renew_seconds(self) -> float:
        """Time between two renewals: a quarter of the Lease's duration, as the kubelet renews."""
        return self._lease_seconds / 4

    def nodes_replaced(self, items: list[JsonObject]) -> None:
        """A full node list."""
        with self._lock:
            self._nodes = {}
        for node in items:
            self.node_event("ADDED", node)

    def node_event(self, kind: str, node: JsonObject) -> None:
        """A node watch event: remember the node's kubelet state and its ``Ready`` condition."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name", ""))
        state = None if kind == "DELETED" else kubelet_state(node)
        with self._lock:
            if state is None:
                self._nodes.pop(name, None)
                return
            transition = next(
                (
                    c.get("lastTransitionTime")
                    for c in (node.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Ready"
                ),
                None,
            )
            known = self._nodes.get(name)
            uid = str(meta.get("uid", ""))
            beat = _Beat(uid, state, ready_status(node), transition)
            if known is not None and known.uid == uid and known.state == state:
                beat.posted, beat.renewed = known.posted, known.renewed
            self._nodes[name] = beat
        if beat.state != STOPPED and (beat.ready != beat.want or beat.renewed == float("-inf")):
            self._wake.set()  # posted at once, as a kubelet that (re)starts does

    def run(self, stop: threading.Event) -> None:
        """Beat until ``stop`` is set."""
        while not stop.is_set():
            self.beat_once()
            self._wake.wait(min(self.renew_seconds / 2, BEAT_TICK_SECONDS))
            self._wake.clear()

    def beat_once(self) -> None:
        """Renew each Lease that is due and post each status that is due or wrong, for live kubelets."""
        now = self._clock()
        with self._lock:
            beats = {name: beat for name, beat in self._nodes.items() if beat.state != STOPPED}
        for name, beat in sorted(beats.items()):
            try:
                if now - beat.renewed >= self.renew_seconds:
                    self._renew(name, beat.uid, now)
                    # The first renewal at once (a kubelet that starts), the next ones at the node's
                    # phase: sooner than a period after this one, never later.
                    first = beat.renewed == float("-inf")
                    beat.renewed = now - (self.renew_seconds * _phase(name) if first else 0.0)
                if beat.ready != beat.want or now - beat.posted >= STATUS_REPORT_SECONDS:
                    self._post(name, beat, now)
            except KubeError as exc:  # the next beat tries again, as a kubelet would
                log.warning("heartbeat of node %s: %s", name, exc)

    def _renew(self, name: str, uid: str, now: float) -> None:
        spec = {"holderIdentity": name, "leaseDurationSeconds": self._lease_seconds, "renewTime": _micro(now)}
        try:
            self._http.request(
                "PATCH",
                f"{NODE_LEASES}/{quote(name)}",
                body={"spec": spec},
                content_type="application/merge-patch+json",
            )
        except NotFoundError:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "ownerReferences": [owner]},  # deleted with its node
                "spec": spec,
            }
            self._http.request("POST", NODE_LEASES, body=lease)

    def _post(self, name: str, beat: _Beat, now: float) -> None:
        want = beat.want
        condition = ready_condition(
            want, _seconds(now), transition=beat.transition if beat.ready == want else None
        )
        self._http.request(
            "PATCH",
            f"/api/v1/nodes/{quote(name)}/status",
            body={"status": {"conditions": [condition]}},
            content_type="application/strategic-merge-patch+json",
        )
        with self._lock:
            first = beat.posted == float("-inf")
            beat.posted, beat.ready = now - (STATUS_REPORT_SECONDS * _phase(name) if first else 0.0), want


def _phase(name: str) -> float:
    """Where in a period node ``name``'s writes fall, in [0, 1): a hash of its name, so a replay agrees."""
    return zlib.crc32(name.encode()) / 2**32


def _micro(now: float) -> str:
    """A ``MicroTime`` (a Lease's ``renewTime``)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seconds(now: float) -> str:
    """A ``Time`` (a condition's timestamps)."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
