"""The phalanx policy on tiny traces whose JCTs are worked out by hand, and what each ablation moves.

Speed is ``GpuSeconds`` (``test_loop``): a job's work is ``batch_size`` GPU-seconds, one per GPU per
second, so only the rules decide the JCTs. Decisions every 60 s, 30 s lost per allocation change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.elastic import ElasticSettings
from scheduling.queues import Queue, ResourceQuota
from simulator.loop import Allocation, ClusterView, Mode, run
from simulator.policies import POLICIES
from simulator.policies.phalanx import Phalanx, PhalanxState
from simulator.simulated_cluster import JobShape, shape_job
from simulator.speed import Advance, Placement, PolluxSpeed, Progress
from simulator.traces import TraceJob, read_pollux_workload
from tests.simulator.test_loop import ONE_NODE, TRACE, GpuSeconds, jcts, job

TWO_NODES = Mode("two-nodes", nodes=2, gpus_per_node=4, step_seconds=60, restart_penalty_seconds=30)


def test_rigid_phalanx_lets_small_gangs_past_one_that_does_not_fit() -> None:
    """A (2 GPUs x 100 s) and c (1 GPU x 30 s, from 10 s) start at 60; b (4 GPUs) waits for a.

    At 60 the admission round walks a, b, c (age, then name): a fits, b does not (2 free) and has
    waited 60 s < 300 s, so it keeps nothing; c fits. c: 30 s restart, 30 s work -> 120, JCT 110.
    a: 90 + 100 -> 190. b starts at the decision at 240: 270 + 60 -> 330.
    """
    result = run(TRACE, Phalanx(elastic=False), GpuSeconds(), ONE_NODE)
    assert jcts(result) == {"a": 190, "b": 330, "c": 110}


def test_elastic_phalanx_starts_every_job_at_its_minimum_and_grows_it() -> None:
    """All start at 60 with one GPU; the elastic round grows a to 2 (a before b on the tie).

    60: a 2, b 1, c 1 (pool 3 = 1 free + 2 elastic). 90..120: a 60 work, b 30, c ends at 120 (JCT 110).
    120: pool 4 -> a 2, b 2 (b resized, 30 s): a 180 of 200, b 90 of 240 at 180.
    180..240: a ends at 190 (JCT 190), b 210. 240: b grows to 4 (resize, 30 s): 270 + ceil(30/4) -> 278.
    """
    result = run(TRACE, Phalanx(), GpuSeconds(), ONE_NODE)
    assert jcts(result) == {"a": 190, "b": 278, "c": 110}
    resizes = {j.name: j.resizes for j in result.jobs}
    assert resizes == {"a": 0, "b": 2, "c": 0}
    assert all(j.partial == 0 for j in result.jobs)


def test_no_elastic_ablation_never_resizes() -> None:
    elastic = run(TRACE, POLICIES["phalanx"](), GpuSeconds(), ONE_NODE)
    rigid = run(TRACE, POLICIES["phalanx-no-elastic"](), GpuSeconds(), ONE_NODE)
    assert sum(j.resizes for j in elastic.jobs) > 0
    assert sum(j.resizes for j in rigid.jobs) == 0


def test_no_topology_ablation_spreads_a_gang_over_the_fragmented_node() -> None:
    """X holds 2 GPUs of n00 from 60; y (4 GPUs, from 100) is placed at 120.

    Node-shaped, y is one 4-GPU worker: only n01 holds it. One GPU per worker, the gang planner puts
    the first worker on the best fit (n00, 2 free), the next beside it, the last two on n01.
    """
    trace = (job("x", 0, 2, 10_000), job("y", 100, 4, 400))
    shaped = run(trace, Phalanx(elastic=False), GpuSeconds(), TWO_NODES)
    blind = run(trace, Phalanx(elastic=False, topology=False), GpuSeconds(), TWO_NODES)
    assert {j.name: j.compact for j in shaped.jobs} == {"x": True, "y": True}
    assert {j.name: j.compact for j in blind.jobs} == {"x": True, "y": False}


QUEUES = (
    Queue("qa", gpu=ResourceQuota(quota=2, over_quota_weight=1)),
    Queue("qb", gpu=ResourceQuota(quota=2, over_quota_weight=1)),
)


def test_reclaim_gives_a_starved_queue_its_quota_back() -> None:
    """x1 and x2 (queue qb, 2 GPUs x 600 s each) fill the node from 60; y (qa, 2 GPUs x 60 s) comes at 100.

    With reclaim, at 120 qa is below its quota and qb above: one of qb's gangs goes whole (x1: same
    start, then by name), never both (qb would fall below its quota). y: 150 + 60 -> 210, JCT 110. x2:
    90 + 600 -> 690. x1 trained 30 s, resumes at the decision at 240: 270 + 570 -> 840.
    Without reclaim y waits for both: decided at 720, 750 + 60 -> 810, JCT 710.
    """
    trace = (
        TraceJob("x1", 0, "fake", 2, 1_200, queue="qb"),
        TraceJob("x2", 0, "fake", 2, 1_200, queue="qb"),
        TraceJob("y", 100, "fake", 2, 120, queue="qa"),
    )
    on = run(trace, Phalanx(elastic=False, queues=QUEUES), GpuSeconds(), ONE_NODE)
    off = run(trace, Phalanx(elastic=False, reclaim=False, queues=QUEUES), GpuSeconds(), ONE_NODE)
    assert jcts(on) == {"x1": 840, "x2": 690, "y": 110}
    assert {j.name: j.preemptions for j in on.jobs} == {"x1": 1, "x2": 0, "y": 0}
    assert jcts(off) == {"x1": 690, "x2": 690, "y": 710}
    assert all(j.preemptions == 0 for j in off.jobs)


@pytest.mark.parametrize(
    ("gpus", "elastic", "shaped", "expected"),
    [
        (6, False, True, JobShape((4, 2), 2, 2)),
        (8, False, True, JobShape((4, 4), 2, 2)),
        (3, False, False, JobShape((1, 1, 1), 3, 3)),
        (5, True, True, JobShape((1,), 1, 5)),
        (1, True, True, JobShape((1,), 1, 1)),
    ],
    ids=["remainder-worker", "two-nodes", "one-gpu-workers", "elastic", "single-gpu"],
)
def test_job_shapes(gpus: int, elastic: bool, shaped: bool, expected: JobShape) -> None:
    assert shape_job(gpus, 4, elastic=elastic, node_shaped=shaped) == expected


def test_same_seed_same_output(shared_dir: Path) -> None:
    jobs = read_pollux_workload(shared_dir / "traces/pollux_workloads/workload-1.csv")[:25]
    speed = PolluxSpeed.load()
    first = run(jobs, Phalanx(), speed, seed=3, timeline=True)
    second = run(jobs, Phalanx(), speed, seed=3, timeline=True)
    assert first == second
    assert first.timeline == second.timeline


THREE_NODES = Mode("three-nodes", nodes=3, gpus_per_node=4, step_seconds=60, restart_penalty_seconds=30)


@st.composite
def traces(draw: st.DrawFn) -> tuple[TraceJob, ...]:
    """Up to 10 jobs on queues qa and qb, arriving over 10 minutes, each 1 to 8 GPUs of 1 to 20 minutes."""
    count = draw(st.integers(1, 10))
    return tuple(
        TraceJob(
            f"j{i}",
            draw(st.integers(0, 600)),
            "fake",
            draw(st.integers(1, 8)),
            draw(st.integers(60, 1_200)),
            queue=draw(st.sampled_from(("qa", "qb"))),
        )
        for i in range(count)
    )


@settings(max_examples=60, deadline=None)
@given(traces(), st.booleans(), st.booleans(), st.booleans())
def test_keeping_the_core_state_across_decisions_decides_as_rebuilding_it_each_time(
    trace: tuple[TraceJob, ...], elastic: bool, topology: bool, reclaim: bool
) -> None:
    def policy(*, keep_state: bool) -> Phalanx:
        return Phalanx(
            elastic=elastic, topology=topology, reclaim=reclaim, queues=QUEUES, keep_state=keep_state
        )

    kept = run(trace, policy(keep_state=True), GpuSeconds(), THREE_NODES, timeline=True)
    rebuilt = run(trace, policy(keep_state=False), GpuSeconds(), THREE_NODES, timeline=True)
    assert kept == rebuilt
    assert kept.timeline == rebuilt.timeline


def test_keeping_the_core_state_decides_as_rebuilding_it_on_a_pollux_workload(shared_dir: Path) -> None:
    jobs = read_pollux_workload(shared_dir / "traces/pollux_workloads/workload-2.csv")[:40]
    speed = PolluxSpeed.load()
    kept = run(jobs, Phalanx(), speed, timeline=True)
    rebuilt = run(jobs, Phalanx(keep_state=False), speed, timeline=True)
    assert kept == rebuilt
    assert kept.timeline == rebuilt.timeline
    assert sum(j.resizes for j in kept.jobs) > 0  # the elastic round's looks were compared too


class Curves:
    """Job ``lin-*`` trains at one sample/s per GPU; ``flat-*`` gains a tenth of that from each GPU past one.

    Both report their samples per second, the only speed the policy may learn from.
    """

    def check(self, job: TraceJob) -> None:
        pass

    def advance(self, job: TraceJob, progress: Progress, placement: Placement, seconds: int) -> Advance:
        gpus = sum(placement)
        rate = float(gpus) if job.name.startswith("lin") else 1.0 + 0.1 * (gpus - 1)
        return Advance(Progress(0, progress.work + rate * seconds), None, rate)

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        return job.batch_size - progress.work


@dataclass
class Watched:
    """A policy whose decisions are kept, to read the GPUs each job held at each step."""

    inner: Phalanx
    held: list[dict[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    def initial(self) -> PhalanxState:
        return self.inner.initial()

    def minimum_gpus(self, job: TraceJob) -> int:
        return self.inner.minimum_gpus(job)

    def decide(self, state: PhalanxState, view: ClusterView) -> tuple[PhalanxState, Mapping[str, Allocation]]:
        state, decided = self.inner.decide(state, view)
        self.held.append({name: len(a) for name, a in decided.items()})
        return state, decided


def test_the_policy_learns_from_reported_rates_which_job_to_grow() -> None:
    """Two jobs of 8 GPUs share 8: with what they reported, the one that scales ends with more.

    ``lin-b`` runs alone first, so both jobs run at more than one size (a job that only ever runs at
    one size reports one point of its curve, and two such jobs look alike to any model).
    """
    trace = (job("lin-b", 0, 8, 10**9), job("flat-a", 600, 8, 10**9))
    learning = Watched(Phalanx())
    run(trace, learning, Curves(), TWO_NODES, until=3600)
    last = learning.held[-1]
    assert last["lin-b"] > last["flat-a"], learning.held
    even = Watched(Phalanx(elastic_settings=ElasticSettings(sizing="even")))
    run(trace, even, Curves(), TWO_NODES, until=3600)
    assert even.held[-1] == {"flat-a": 4, "lin-b": 4}


def test_a_job_that_reports_nothing_is_sized_by_the_prior() -> None:
    """GpuSeconds reports no rate: the learning policy sizes as if both scaled linearly: evenly."""
    trace = (job("a", 0, 8, 10**9), job("b", 0, 8, 10**9))
    watched = Watched(Phalanx())
    run(trace, watched, GpuSeconds(), TWO_NODES, until=1200)
    assert watched.held[-1] == {"a": 4, "b": 4}
