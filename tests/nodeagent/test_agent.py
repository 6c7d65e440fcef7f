"""The agent loop: one cycle never raises, failures back off, success waits the interval, stop stops."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from kubeio.errors import UnavailableError
from nodeagent.agent import Backoff, CycleOutcome, NodeAgent
from nodeagent.fake_nvml import FakeNvml
from nodeagent.nvml_constants import NvmlConstants as C
from nodeagent.nvml_reader import NvmlReading, NvmlTopologyReader, ReadStatus
from nodeagent.publisher import TopologyPublisher
from scheduling.model import TOPOLOGY_ANNOTATION

from .fakes import CountingStop, MemoryStore, kube_errors
from .imported import document

NODE = "gpu-node-1"
DOC = document("hgx-h100-partial")
GOOD = NvmlReading(ReadStatus.COMPLETE, DOC)
UNAVAILABLE = NvmlReading(ReadStatus.NVML_UNAVAILABLE, detail="NVML Shared Library Not Found")
NO_GPUS = NvmlReading(ReadStatus.NO_GPUS, detail="NVML reports no GPU")


@dataclass
class ScriptedReader:
    """Returns the scripted readings in order (the last one forever); an exception in the script is raised."""

    script: list[NvmlReading | Exception]
    calls: int = 0

    def __call__(self) -> NvmlReading:
        step = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        if isinstance(step, Exception):
            raise step
        return step


def agent(read: Callable[[], NvmlReading], store: MemoryStore) -> NodeAgent:
    return NodeAgent(
        read,
        TopologyPublisher(store, NODE),
        interval=60.0,
        backoff=Backoff(5.0, 300.0),
        log=logging.getLogger("t"),
    )


@dataclass(frozen=True)
class LoopCase:
    id: str
    script: list[NvmlReading | Exception]
    cycles: int
    waits: list[float]
    patches: int
    api_failures: list[Exception] = field(default_factory=list)


LOOPS = [
    LoopCase("steady", [GOOD], 3, [60, 60, 60], 1),
    LoopCase("driver-late", [UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, GOOD], 5, [5, 10, 20, 60, 60], 1),
    LoopCase("backoff-caps", [UNAVAILABLE], 8, [5, 10, 20, 40, 80, 160, 300, 300], 0),
    LoopCase("reader-bug", [RuntimeError("boom"), GOOD], 3, [5, 60, 60], 1),
    LoopCase("no-gpus", [NO_GPUS], 2, [60, 60], 0),
    LoopCase("api-down", [GOOD], 4, [5, 10, 60, 60], 1, list(kube_errors(503, 0))),
    LoopCase("forbidden", [GOOD], 3, [5, 60, 60], 1, list(kube_errors(403))),
    LoopCase("store-bug", [GOOD], 2, [5, 60], 1, [KeyError("surprise")]),
    LoopCase("recovers-then-fails", [GOOD, UNAVAILABLE, GOOD], 3, [60, 5, 60], 1),
]


@pytest.mark.parametrize("case", LOOPS, ids=lambda c: c.id)
def test_loop_waits_and_publishes(case: LoopCase) -> None:
    store = MemoryStore(failures=list(case.api_failures))
    stop = CountingStop(case.cycles)
    agent(ScriptedReader(list(case.script)), store).run(stop)
    assert stop.waits == case.waits
    assert len(store.patches) == case.patches
    if case.patches:
        assert store.annotations[(NODE, TOPOLOGY_ANNOTATION)] == DOC.to_json()


def test_a_stop_before_the_first_cycle_runs_nothing() -> None:
    reader = ScriptedReader([GOOD])
    stop = threading.Event()
    stop.set()
    agent(reader, MemoryStore()).run(stop)
    assert reader.calls == 0


def test_a_stop_during_the_wait_ends_the_loop_promptly() -> None:
    stop = threading.Event()
    store = MemoryStore()
    loop = NodeAgent(
        ScriptedReader([GOOD]), TopologyPublisher(store, NODE), interval=3600, backoff=Backoff(1, 1)
    )
    thread = threading.Thread(target=loop.run, args=(stop,))
    thread.start()
    for _ in range(500):
        if store.patches:
            break
        threading.Event().wait(0.01)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(store.patches) == 1


@dataclass(frozen=True)
class NvmlCase:
    id: str
    fake: FakeNvml
    outcome: CycleOutcome


NVML_CASES = [
    NvmlCase("healthy", FakeNvml(document("a30-bridged")), CycleOutcome.PUBLISHED),
    NvmlCase(
        "library-missing",
        FakeNvml(document("a30-bridged"), init_error=C.NVML_ERROR_LIBRARY_NOT_FOUND),
        CycleOutcome.FAILED,
    ),
    NvmlCase(
        "gpu-lost",
        FakeNvml(document("a30-bridged"), lose_gpu={2: "nvmlDeviceGetNvLinkRemotePciInfo"}),
        CycleOutcome.PUBLISHED,
    ),
    NvmlCase(
        "nvlink-unsupported",
        FakeNvml(document("a30-bridged"), nvlink_unsupported=True),
        CycleOutcome.PUBLISHED,
    ),
    NvmlCase("mig", FakeNvml(document("a30-bridged"), mig_gpus=[0]), CycleOutcome.PUBLISHED),
    NvmlCase("zero-gpus", FakeNvml(None), CycleOutcome.NOTHING_TO_PUBLISH),
    NvmlCase(
        "unknown-error",
        FakeNvml(document("a30-bridged"), errors={"nvmlDeviceGetHandleByIndex": C.NVML_ERROR_UNKNOWN}),
        CycleOutcome.FAILED,
    ),
]


@pytest.mark.parametrize("case", NVML_CASES, ids=lambda c: c.id)
def test_nvml_failures_never_escape_a_cycle(case: NvmlCase) -> None:
    store = MemoryStore()
    loop = agent(NvmlTopologyReader(case.fake).read, store)
    assert loop.run_once() is case.outcome
    assert case.fake.sessions == 0
    published = store.annotations.get((NODE, TOPOLOGY_ANNOTATION))
    assert (published is not None) is (case.outcome is CycleOutcome.PUBLISHED)
    if case.outcome is CycleOutcome.PUBLISHED:
        assert loop.run_once() is CycleOutcome.UNCHANGED


def test_a_changed_topology_is_published_again() -> None:
    fake_healthy = FakeNvml(document("a30-bridged"))
    fake_lost = FakeNvml(document("a30-bridged"), lose_gpu={3: "nvmlDeviceGetUUID"})
    store = MemoryStore()
    agent(NvmlTopologyReader(fake_healthy).read, store).run_once()
    assert agent(NvmlTopologyReader(fake_lost).read, store).run_once() is CycleOutcome.PUBLISHED
    assert agent(NvmlTopologyReader(FakeNvml(document("a30-bridged"))).read, store).run_once() is (
        CycleOutcome.PUBLISHED
    )
    assert len(store.patches) == 3


def test_api_errors_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore(failures=[UnavailableError(0, "Unavailable", "connection refused")])
    assert agent(ScriptedReader([GOOD]), store).run_once() is CycleOutcome.FAILED
    assert "could not publish" in caplog.text and "connection refused" in caplog.text


@pytest.mark.parametrize(("failures", "delay"), [(1, 5), (2, 10), (7, 300), (10_000, 300)])
def test_backoff(failures: int, delay: float) -> None:
    assert Backoff(5, 300).delay(failures) == delay
