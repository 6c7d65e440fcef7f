"""GPU health from NVML events, on the fake NVML: critical Xids fail a GPU, application errors do not."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubeio.errors import ConflictError
from nodeagent.fake_nvml import FakeNvml
from nodeagent.gpu_devices import GpuDevices
from nodeagent.gpu_health import HealthWatcher
from nodeagent.health_reporter import HealthReporter
from nodeagent.node_metrics import NodeMetrics
from nodeagent.nvml_reader import NvmlTopologyReader
from scheduling.topology.builders import uniform
from tests.builders import FakeEvents
from tests.nodeagent.fakes import MemoryStore
from tests.nodeagent.plugin_fixtures import wait_for
from tests.nodeagent.test_truth_keeper import pod

DOCUMENT = uniform(8, "NV12", gpu_model="NVIDIA A100-SXM4-40GB")


class Failures:
    def __init__(self) -> None:
        self.reports: list[tuple[str, str]] = []

    def __call__(self, uuid: str, reason: str) -> None:
        self.reports.append((uuid, reason))


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[FakeNvml, Failures, Path]]:
    xid_file = tmp_path / "xid"
    nvml = FakeNvml(DOCUMENT, xid_file=str(xid_file))
    failures = Failures()
    uuids = [gpu.uuid for gpu in nvml.node.gpus]
    stop = threading.Event()
    thread = threading.Thread(
        target=HealthWatcher(nvml, uuids, failures, wait_ms=100).run, args=(stop,), daemon=True
    )
    thread.start()
    wait_for("the GPUs registered for events", lambda: nvml.calls["nvmlDeviceRegisterEvents"] == 8)
    yield nvml, failures, xid_file
    stop.set()
    thread.join(15)
    assert nvml.sessions == 0


def test_a_critical_xid_fails_its_gpu(watched: tuple[FakeNvml, Failures, Path]) -> None:
    nvml, failures, _ = watched
    nvml.inject_xid(3, 79)
    wait_for("a failure", lambda: failures.reports)
    assert failures.reports == [(nvml.node.gpus[3].uuid, "critical Xid 79")]


def test_application_xids_leave_the_gpu_healthy(watched: tuple[FakeNvml, Failures, Path]) -> None:
    nvml, failures, _ = watched
    for xid in (13, 31, 43, 45, 68, 109):
        nvml.inject_xid(2, xid)
    nvml.inject_xid(5, 48)  # double-bit ECC error: critical
    wait_for("the critical one", lambda: failures.reports)
    assert failures.reports == [(nvml.node.gpus[5].uuid, "critical Xid 48")]


def test_xids_come_from_the_file_line_by_line(watched: tuple[FakeNvml, Failures, Path]) -> None:
    nvml, failures, xid_file = watched
    xid_file.write_text("6 79\n7 9")  # the second line is not complete yet
    wait_for("the first line", lambda: failures.reports)
    with xid_file.open("a") as handle:
        handle.write("4\n")
    wait_for("the second line", lambda: len(failures.reports) == 2)
    assert [u for u, _ in failures.reports] == [nvml.node.gpus[6].uuid, nvml.node.gpus[7].uuid]


def test_without_nvml_health_checks_are_off_and_nothing_fails() -> None:
    nvml = FakeNvml(DOCUMENT, init_error=12)
    failures = Failures()
    HealthWatcher(nvml, ["GPU-x"], failures).run(threading.Event())
    assert failures.reports == []


def test_a_failing_gpu_is_withdrawn_published_and_told_to_its_pods() -> None:
    nvml = FakeNvml(DOCUMENT)
    read = NvmlTopologyReader(nvml).read().document  # what the agent reads: with the GPUs' UUIDs
    assert read is not None
    devices = GpuDevices.from_document(read)
    store, recorder, metrics = MemoryStore(nodes=frozenset({"n1"})), FakeEvents(), NodeMetrics()
    holders = {"ns/a": pod("ns/a", (2, 3), 2), "ns/b": pod("ns/b", (4,), 1)}
    reporter = HealthReporter(
        devices,
        store,
        "n1",
        recorder,
        held=lambda: {"ns/a": (2, 3), "ns/b": (4,)},
        pods=lambda: holders,
        metrics=metrics,
    )
    uuid = nvml.node.gpus[3].uuid
    reporter.on_unhealthy(uuid, "critical Xid 79")
    reporter.on_unhealthy(uuid, "critical Xid 79")  # once is enough
    assert not devices.healthy(3)
    assert store.annotations[("n1", "phalanx.io/unhealthy-gpus")] == "3"
    assert [(n, r) for _, n, _, r, _ in recorder.events] == [("a", "GPUUnhealthy")]
    assert "GPU 3" in recorder.events[0][4]
    assert metrics.unhealthy_gpus._value.get() == 1


def test_a_refused_publish_is_retried_until_it_lands() -> None:
    nvml = FakeNvml(DOCUMENT)
    read = NvmlTopologyReader(nvml).read().document
    assert read is not None
    devices = GpuDevices.from_document(read)
    store = MemoryStore(nodes=frozenset({"n1"}), failures=[ConflictError(409, "Conflict", "try again")])
    reporter = HealthReporter(devices, store, "n1", FakeEvents(), held=dict, pods=dict, metrics=NodeMetrics())
    reporter.on_unhealthy(nvml.node.gpus[1].uuid, "critical Xid 79")
    assert ("n1", "phalanx.io/unhealthy-gpus") not in store.annotations
    stop = threading.Event()
    thread = threading.Thread(target=reporter.run, args=(stop,), kwargs={"retry_seconds": 0.05}, daemon=True)
    thread.start()
    wait_for("the retry", lambda: store.annotations.get(("n1", "phalanx.io/unhealthy-gpus")) == "1")
    stop.set()
    thread.join(5)
