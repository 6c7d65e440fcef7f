"""The node agent's Prometheus metrics (served on ``--metrics-port`` when set).

Every silent way for phalanx's GPU choice to be lost on the node has a series here: a preference the
plugin had to guess, an allocation of other GPUs than preferred, an annotation rewritten to the truth,
a GPU two pods report holding, a GPU gone unhealthy, a failed read of the kubelet.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from scheduling.devices.claims import Preference
from scheduling.devices.truth import Kind


class NodeMetrics:
    """The series, in one registry of their own."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.preferences = Counter(
            "phalanx_device_plugin_preferences",
            "GetPreferredAllocation answers by basis: placed (one pod could be in admission), kubelet "
            "(the kubelet named the pod), guessed (it could not be told), unclaimed (no phalanx set)",
            ["basis"],
            registry=self.registry,
        )
        self.allocations = Counter(
            "phalanx_device_plugin_allocations",
            "Allocate calls by outcome: as_preferred, deviated (other GPUs than preferred), unasked",
            ["outcome"],
            registry=self.registry,
        )
        self.corrections = Counter(
            "phalanx_node_gpu_corrections",
            "phalanx.io/gpus annotations rewritten to what the kubelet gave: mismatch (phalanx chose "
            "other GPUs), unannotated (a GPU pod phalanx did not place)",
            ["kind"],
            registry=self.registry,
        )
        self.truth_reads = Counter(
            "phalanx_node_kubelet_reads",
            "Reads of the kubelet's PodResources by outcome (ok, failed)",
            ["outcome"],
            registry=self.registry,
        )
        self.held_twice_gpus = Gauge(
            "phalanx_node_gpus_held_twice",
            "GPUs that two pods report holding in the latest read of the kubelet (never expected)",
            registry=self.registry,
        )
        self.unhealthy_gpus = Gauge(
            "phalanx_node_gpus_unhealthy", "GPUs marked unhealthy through NVML events", registry=self.registry
        )

    def preferred(self, preference: Preference) -> None:
        """Count one preference."""
        self.preferences.labels(preference.basis.value).inc()

    def allocated(self, outcome: str) -> None:
        """Count one Allocate."""
        self.allocations.labels(outcome).inc()

    def corrected(self, kind: Kind) -> None:
        """Count one correction."""
        self.corrections.labels(kind.value).inc()

    def read(self, ok: bool) -> None:
        """Count one read of the kubelet."""
        self.truth_reads.labels("ok" if ok else "failed").inc()

    def held_twice(self, count: int) -> None:
        """Set the GPUs held twice in the latest read."""
        self.held_twice_gpus.set(count)
