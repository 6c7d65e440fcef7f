"""The loop and both policies on tiny traces whose JCTs are worked out by hand.

The fake speed model makes a job's work ``batch_size`` GPU-seconds, done at one unit per GPU per second,
so only the loop's and the policies' rules decide the JCTs. The cluster is one node of 4 GPUs with the
Pollux mode's clock: a decision every 60 s, 30 s lost whenever a job's allocation changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from simulator.job_track import placement_of
from simulator.loop import (
    POLLUX,
    Allocation,
    ClusterView,
    Mode,
    SimulationError,
    run,
)
from simulator.policies.fifo import Fifo
from simulator.policies.tiresias import Tiresias, _most_free_first
from simulator.results import RunResult
from simulator.speed import Advance, Placement, Progress
from simulator.traces import TraceJob

ONE_NODE = Mode("one-node", nodes=1, gpus_per_node=4, step_seconds=60, restart_penalty_seconds=30)


class GpuSeconds:
    """Work = ``batch_size`` GPU-seconds; each GPU does one per second; ends rounded up to a second."""

    def check(self, job: TraceJob) -> None:
        pass

    def advance(self, job: TraceJob, progress: Progress, placement: Placement, seconds: int) -> Advance:
        rate = sum(placement)
        left = job.batch_size - progress.work
        if left <= rate * seconds:
            return Advance(Progress(1, float(job.batch_size)), math.ceil(left / rate))
        return Advance(Progress(0, progress.work + rate * seconds), None)

    def remaining_work(self, job: TraceJob, progress: Progress) -> float:
        return job.batch_size - progress.work


def job(name: str, time: int, gpus: int, gpu_seconds: int) -> TraceJob:
    return TraceJob(name, time, "fake", gpus, gpu_seconds)


# a: 2 GPUs x 100 s; b: 4 GPUs x 60 s; c: 1 GPU x 30 s, arriving after a and b.
TRACE = (job("a", 0, 2, 200), job("b", 0, 4, 240), job("c", 10, 1, 30))


def jcts(result: RunResult) -> dict[str, int]:
    return {j.name: j.jct for j in result.jobs}


def test_fifo_strict_gang_blocks_the_queue_behind_it() -> None:
    result = run(TRACE, Fifo(), GpuSeconds(), ONE_NODE)
    # a: decided at 60, 30 s restart, 100 s training in 60..120 (30), 120..180 (60), 180..190 (10) -> 190.
    # b needs all 4 GPUs: waits for the decision at 240, restart to 270, 60 s training -> 330.
    # c fits beside a at 60 but FIFO is strict: it waits behind b until the decision at 360 -> 420 - 10.
    assert jcts(result) == {"a": 190, "b": 330, "c": 410}
    assert result.average_jct == pytest.approx((190 + 330 + 410) / 3)


def test_tiresias_lets_small_jobs_pass_a_job_that_does_not_fit() -> None:
    result = run(TRACE, Tiresias(), GpuSeconds(), ONE_NODE)
    # At 60: a runs (2 of 4), b (4) does not fit, c (1) does: c restarts to 90, trains 30 s -> 120 - 10.
    assert jcts(result) == {"a": 190, "b": 330, "c": 110}


def test_tiresias_demotes_a_long_job_and_a_short_one_preempts_it() -> None:
    # x: 4 GPUs x 300 s from 0; y: 4 GPUs x 30 s from 100; demotion after 480 GPU-s = 120 s on 4 GPUs.
    trace = (job("x", 0, 4, 1200), job("y", 100, 4, 120))
    result = run(trace, Tiresias(threshold_gpu_seconds=480), GpuSeconds(), ONE_NODE)
    # x: runs from 60 (restart to 90), executed 60 s at 120 and 120 s at 180 -> demoted; y (queue 0)
    # preempts it at 180 and ends at 180 + 30 + 30 = 240 (JCT 140). x resumes at 240 with a second
    # restart; it had trained 90 s, needs 210 more: 270..480.
    assert jcts(result) == {"x": 480, "y": 140}
    assert {j.name: j.restarts for j in result.jobs} == {"x": 1, "y": 0}


def test_the_gpu_sets_record_a_preemption_so_occupancy_rebuilds_without_double_booking() -> None:
    trace = (job("x", 0, 4, 1200), job("y", 100, 4, 120))
    result = run(trace, Tiresias(threshold_gpu_seconds=480), GpuSeconds(), ONE_NODE)
    placements = {j.name: j.placements for j in result.jobs}
    assert placements["x"] == ((60, ((0, (0, 1, 2, 3)),)), (180, ()), (240, ((0, (0, 1, 2, 3)),)))
    held: dict[str, set[int]] = {}
    for now in range(0, 481, 60):  # rebuild who holds which GPU at each decision from the record alone
        for name, entries in placements.items():
            last = [sets for at, sets in entries if at <= now and j_alive(result, name, now)]
            held[name] = {g for _, gpus in (last[-1] if last else ()) for g in gpus}
        taken = [g for gpus in held.values() for g in gpus]
        assert len(taken) == len(set(taken)), (now, held)


def j_alive(result: RunResult, name: str, now: int) -> bool:
    return next(j for j in result.jobs if j.name == name).completed > now


def test_without_demotion_the_short_job_waits() -> None:
    trace = (job("x", 0, 4, 1200), job("y", 100, 4, 120))
    result = run(trace, Tiresias(), GpuSeconds(), ONE_NODE)
    # x trains 300 s from 90 -> 390; y decided at 420, restart to 450, 30 s -> 480.
    assert jcts(result) == {"x": 390, "y": 380}


def test_tiresias_places_on_the_node_with_most_free_gpus_lowest_index_first() -> None:
    free = {0: 2, 1: 3, 2: 3}
    assert _most_free_first(free, 5) == (1, 1, 1, 2, 2)
    assert free == {0: 2, 1: 0, 2: 1}


def test_placement_counts_consecutive_nodes() -> None:
    assert placement_of((3, 3, 3, 3, 5, 5)) == (4, 2)
    assert placement_of((0,)) == (1,)


@dataclass(frozen=True)
class Greedy:
    """A broken policy: gives every job every GPU of node 0."""

    name: str = "greedy"

    def initial(self) -> None:
        return None

    def decide(self, state: None, view: ClusterView) -> tuple[None, Mapping[str, Allocation]]:
        return None, {j.name: (0,) * view.nodes[0] for j in view.jobs}

    def minimum_gpus(self, job: TraceJob) -> int:
        return job.num_replicas


def test_over_committing_policy_stops_the_run() -> None:
    with pytest.raises(SimulationError, match="t=60: policy greedy put 12 GPUs on node 0"):
        run(TRACE, Greedy(), GpuSeconds(), ONE_NODE)


def test_a_job_bigger_than_the_cluster_hits_the_horizon() -> None:
    with pytest.raises(SimulationError, match="horizon of 600 s after the last arrival passed with 1 jobs"):
        run((job("huge", 0, 5, 5),), Fifo(), GpuSeconds(), ONE_NODE, horizon_seconds=600)


def test_a_trace_longer_than_the_horizon_replays_and_the_message_counts_arrived_jobs_only() -> None:
    """The openb trace spans 149 days: the horizon counts from the last arrival, not the start."""
    late = (job("early", 0, 1, 60), job("late", 100 * 86_400, 1, 60))
    result = run(late, Fifo(), GpuSeconds(), ONE_NODE, horizon_seconds=86_400)
    assert sorted(j.name for j in result.jobs) == ["early", "late"]
    stuck = (job("small", 0, 1, 60), job("huge", 86_400, 5, 5))
    with pytest.raises(SimulationError, match=r"passed with 1 jobs not completed: \['huge'\]"):
        run(stuck, Fifo(), GpuSeconds(), ONE_NODE, horizon_seconds=600)


def test_pollux_mode_is_the_artifacts_cluster_and_clock() -> None:
    assert (POLLUX.nodes, POLLUX.gpus_per_node, POLLUX.step_seconds, POLLUX.restart_penalty_seconds) == (
        16,
        4,
        60,
        30,
    )
