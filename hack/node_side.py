"""Node-side scenarios on the test bed: does every container get the GPUs phalanx chose?

Shared by the end-to-end tests (``tests/e2e/test_node_side.py``) and ``hack/node_side_figures.py``,
which prints the figures. A :class:`Observer` polls the pods of a namespace in a thread of its own and
records, independently of phalanx, what each container really got: the devices the kubelet's device
manager reported in ``allocatedResourcesStatus`` (by UUID, mapped to indices through each node's
published topology), the annotation at every observation, and any GPU two running pods of one node held
at the same time.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workload import create_pod, gpu_pod, list_pods

from kubeio.http import JsonObject, KubeHttp
from scheduling.model import GPU_RESOURCE, GPUS_ANNOTATION, TOPOLOGY_ANNOTATION

DEVICE_KEY = "phalanx.io/e2e-devices"
"""Label and taint key of the device-managed nodes, so a shared test bed's other tests stay off them."""


def device_pod(name: str, gpus: int, seconds: float | None = None, *, node: str | None = None) -> JsonObject:
    """A GPU pod for the device-managed nodes labelled ``DEVICE_KEY=burst`` (or for one ``node``).

    It finishes after ``seconds`` (runs until deleted without).
    """
    annotations = {"phalanx.io/sim-duration-seconds": f"{seconds:g}"} if seconds is not None else {}
    selector = {"kubernetes.io/hostname": node} if node else {DEVICE_KEY: "burst"}
    pod = gpu_pod(name, gpus, annotations=annotations, node_selector=selector)
    pod["spec"]["tolerations"] = [{"key": DEVICE_KEY, "operator": "Exists"}]
    return pod


def uuid_indices(http: KubeHttp, nodes: Sequence[str]) -> dict[str, dict[str, int]]:
    """Node -> GPU UUID -> index, from the nodes' published topology documents."""
    found: dict[str, dict[str, int]] = {}
    for node in nodes:
        meta = http.request("GET", f"/api/v1/nodes/{node}")["metadata"]
        document = json.loads((meta.get("annotations") or {})[TOPOLOGY_ANNOTATION])
        found[node] = {gpu["uuid"]: index for index, gpu in enumerate(document["gpus"]) if gpu.get("uuid")}
    return found


@dataclass
class PodTrace:
    """What the observer saw of one pod."""

    name: str
    gpus: int
    node: str = ""
    first_annotation: tuple[int, ...] | None = None
    devices: tuple[int, ...] | None = None
    bound_at: float | None = None
    running_at: float | None = None
    agreed_at: float | None = None
    phase: str = "Pending"
    reason: str = ""

    @property
    def mismatched(self) -> bool:
        """The devices differ from the set phalanx chose at bind."""
        return self.devices is not None and self.devices != self.first_annotation

    @property
    def detection_seconds(self) -> float | None:
        """From the pod seen bound to its annotation seen equal to its devices.

        For a corrected pod, an upper bound of the time from the kubelet's allocation to the correction
        (the pod is admitted after it is bound), to the observer's polling interval: 0 when the
        correction was made before the observer first saw the pod bound.
        """
        if self.bound_at is None or self.agreed_at is None:
            return None
        return self.agreed_at - self.bound_at


def _indices(text: object) -> tuple[int, ...] | None:
    if not isinstance(text, str) or not text:
        return None
    return tuple(sorted(int(part) for part in text.split(",")))


class Observer:
    """Polls a namespace's pods every ``interval`` seconds until stopped."""

    def __init__(
        self, http: KubeHttp, namespace: str, uuids: Mapping[str, Mapping[str, int]], interval: float = 0.25
    ):
        self._http = http
        self._namespace = namespace
        self._uuids = uuids
        self._interval = interval
        self.traces: dict[str, PodTrace] = {}
        self.held_twice: list[str] = []
        self.unknown_devices: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)

    def __enter__(self) -> Observer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.observe(list_pods(self._http, self._namespace))
            except Exception as exc:  # a slow API server must not end the observation
                self.unknown_devices.append(f"observation failed: {exc}")
            self._stop.wait(self._interval)

    def observe(self, pods: list[JsonObject]) -> None:
        """Record one observation of ``pods``."""
        now = time.monotonic()
        holders: dict[tuple[str, int], list[str]] = {}
        for pod in pods:
            meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
            name = meta["name"]
            requests = spec["containers"][0]["resources"]["limits"]
            trace = self.traces.setdefault(name, PodTrace(name, int(requests.get(GPU_RESOURCE, "0"))))
            annotation = _indices((meta.get("annotations") or {}).get(GPUS_ANNOTATION))
            node = spec.get("nodeName") or ""
            if node and trace.bound_at is None:
                trace.node, trace.first_annotation, trace.bound_at = node, annotation, now
            trace.phase, trace.reason = status.get("phase", "Pending"), status.get("reason", "")
            devices = self._devices(node, status)
            if devices is not None and trace.devices is None:
                trace.devices, trace.running_at = devices, now
            if trace.devices is not None and annotation == trace.devices and trace.agreed_at is None:
                trace.agreed_at = now
            if trace.phase == "Running" and devices:
                for index in devices:
                    holders.setdefault((node, index), []).append(name)
        for (node, index), names in sorted(holders.items()):
            if len(names) > 1:
                self.held_twice.append(f"{node} GPU {index}: {sorted(names)}")

    def _devices(self, node: str, status: Mapping[str, Any]) -> tuple[int, ...] | None:
        ids = [
            r["resourceID"]
            for c in status.get("containerStatuses") or []
            for s in c.get("allocatedResourcesStatus") or []
            if s.get("name") == GPU_RESOURCE
            for r in s.get("resources") or []
        ]
        if not ids:
            return None
        table = self._uuids.get(node, {})
        unknown = [i for i in ids if i not in table]
        if unknown:
            self.unknown_devices.append(f"{node}: {unknown}")
            return None
        return tuple(sorted(table[i] for i in ids))


@dataclass(frozen=True)
class Figures:
    """The closing figures of a run."""

    pods: int
    ran: int
    rejected: int
    mismatches: int
    held_twice: int
    detection_seconds: tuple[float, ...] = field(default_factory=tuple)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        """Printable lines."""
        times = sorted(self.detection_seconds)
        detection = (
            f"max {times[-1]:.2f}s, median {times[len(times) // 2]:.2f}s from the pod seen bound "
            f"(observer polls every 0.25s)"
            if times
            else "none to detect"
        )
        return [
            f"pods {self.pods}: ran {self.ran}, rejected at admission {self.rejected}; {self.seconds:.0f}s",
            f"containers whose devices differ from the GPUs phalanx chose: {self.mismatches}",
            f"GPUs held by two running pods at once: {self.held_twice}",
            f"mismatch detected and corrected: {detection}",
        ]


def corrected_pods(http: KubeHttp, namespace: str) -> dict[str, str]:
    """Pod -> message of every ``GPUsCorrected`` event in the namespace (the node agent's corrections)."""
    query = {"fieldSelector": "reason=GPUsCorrected"}
    events = http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return {e["involvedObject"]["name"]: e.get("message", "") for e in events}


def figures(observer: Observer, seconds: float, corrected: Mapping[str, str]) -> Figures:
    """Sum up an observation; a pod the node agent corrected counts as a mismatch even if unobserved."""
    traces = list(observer.traces.values())
    return Figures(
        pods=len(traces),
        ran=sum(1 for t in traces if t.devices is not None),
        rejected=sum(1 for t in traces if t.phase == "Failed" and t.devices is None),
        mismatches=len({t.name for t in traces if t.mismatched} | set(corrected)),
        held_twice=len(observer.held_twice),
        detection_seconds=tuple(
            d
            for t in traces
            if (t.mismatched or t.name in corrected) and (d := t.detection_seconds) is not None
        ),
        seconds=seconds,
    )


def burst(
    http: KubeHttp,
    namespace: str,
    *,
    pods: int = 200,
    per_burst: int = 25,
    gap: float = 3.0,
    sizes: Sequence[tuple[int, int]] = ((1, 4), (2, 3), (4, 2), (8, 1)),
    seconds: tuple[float, float] = (2.0, 5.0),
    node: str | None = None,
    seed: int = 25,
    prefix: str = "b",
) -> list[str]:
    """Create ``pods`` pods in bursts, GPU sizes drawn by weight (``(size, weight)``); return their names."""
    rng = random.Random(seed)
    choices = [size for size, weight in sizes for _ in range(weight)]
    names = []
    for start in range(0, pods, per_burst):
        for i in range(start, min(start + per_burst, pods)):
            name = f"{prefix}{i:03d}"
            create_pod(
                http, namespace, device_pod(name, rng.choice(choices), rng.uniform(*seconds), node=node)
            )
            names.append(name)
        if start + per_burst < pods:
            time.sleep(gap)
    return names


def settled(http: KubeHttp, namespace: str) -> bool:
    """Every pod of the namespace finished (Succeeded) or was rejected (Failed)."""
    return all(
        (p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in list_pods(http, namespace)
    )
