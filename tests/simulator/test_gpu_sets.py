"""GPU indices inside a node: first-fit for topology-blind policies, the core's choice for phalanx.

The node is the 8 x RTX A6000 with bridged pairs 0-1, 2-3, 4-5, 6-7 (see ``test_link_speed``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.cluster.usage import FreeGpus
from scheduling.gpu.choice import choose_gpus
from scheduling.topology import NodeTopology, TopologyCache
from simulator.cluster_spec import read_cluster
from simulator.comparison_table import goals, render
from simulator.gpu_sets import GpuSetError, nvlink_verdict, place_gpus
from simulator.link_speed import LinkSpeed
from simulator.loop import Mode, run
from simulator.philly import RigidSpeed
from simulator.policies.fifo import Fifo
from simulator.policies.phalanx import Phalanx
from simulator.results import JobResult, RunResult
from simulator.run_figures import figures
from simulator.traces import TraceJob

CLUSTER = Path(__file__).resolve().parents[2] / "simulator" / "data" / "clusters" / "a6000-bridge-pairs.toml"
ONE_A6000 = Mode("a6000", nodes=1, gpus_per_node=8, step_seconds=60, restart_penalty_seconds=30)
BRIDGED = {(0, 1), (2, 3), (4, 5), (6, 7)}


def _a6000() -> NodeTopology:
    topology = read_cluster(CLUSTER).topologies(1, TopologyCache())[0]
    assert topology is not None
    return topology


def test_first_fit_takes_the_lowest_free_indices() -> None:
    """Job a keeps (0,); b asks 2 GPUs on node 0: lowest free are 1 and 2 (across a bridge)."""
    placed = place_gpus({"a": (0,), "b": (0, 0)}, {}, {"a": ((0, (0,)),)}, (8,))
    assert placed == {"a": ((0, (0,)),), "b": ((0, (1, 2)),)}


def test_the_core_takes_a_whole_bridge_where_first_fit_splits_one() -> None:
    """With GPU 0 taken, the bridged pairs 2-3, 4-5 and 6-7 tie at 72,000 MB/s; 2-3 leaves the least.

    Pair bandwidth from the chosen pair to the GPUs left free: 2-3 -> to 1 (two NODE pairs, 24,000
    each) and to 4..7 (eight SYS pairs, 10,000) = 128,000; 4-5 or 6-7 -> to 1..3 (six SYS pairs)
    60,000 plus to the other pair of the socket (four NODE pairs) 96,000 = 156,000.
    """
    policy = Phalanx(documents=(_a6000().document,))
    node = policy.nodes(1, 8)[0]
    assert choose_gpus(node, FreeGpus(frozenset(range(1, 8)), 7), 2, policy.topologies) == (2, 3)
    assert place_gpus({"b": (0, 0)}, {}, {}, (8,)) == {"b": ((0, (0, 1)),)}


def test_a_chosen_set_must_match_the_allocation() -> None:
    with pytest.raises(GpuSetError, match="do not match"):
        place_gpus({"a": (0, 0)}, {"a": ((0, (3,)),)}, {}, (8,))


def test_a_chosen_set_must_not_overlap_another_job() -> None:
    with pytest.raises(GpuSetError, match="held by another job"):
        place_gpus({"a": (0,), "b": (0,)}, {"a": ((0, (3,)),), "b": ((0, (3,)),)}, {}, (8,))


@pytest.mark.parametrize(
    ("sets", "others", "verdict"),
    [
        pytest.param(((0, (2, 3)),), {0: frozenset({0})}, True, id="bridged-pair"),
        pytest.param(((0, (1, 2)),), {0: frozenset({0})}, False, id="split-while-2-3-was-free"),
        pytest.param(((0, (1, 2)),), {0: frozenset({0, 3, 4, 6})}, None, id="no-whole-bridge-free"),
        pytest.param(((0, (0, 1, 2, 3)),), {}, None, id="no-nvlinked-quad-exists"),
        pytest.param(((0, (5,)),), {}, None, id="one-gpu"),
    ],
)
def test_nvlink_verdict(
    sets: tuple[tuple[int, tuple[int, ...]], ...], others: dict[int, frozenset[int]], verdict: bool | None
) -> None:
    assert nvlink_verdict(sets, others, (_a6000(),)) is verdict


def test_fifo_splits_a_bridge_and_phalanx_does_not() -> None:
    """Jobs a (1 GPU) and b (2 GPUs) arrive at 0 and start at 60.

    FIFO: a takes GPU 0 and b the lowest free, 1 and 2: split, though 2-3 was free. Phalanx: the core
    gives b a bridged pair. The link model slows the split pair by T(72,000) / T(24,000).
    """
    topology = _a6000()
    trace = (
        TraceJob("a", 0, "rigid", 1, 1, duration=600),
        TraceJob("b", 0, "rigid", 2, 1, duration=600),
    )
    speed = LinkSpeed(RigidSpeed(8), (topology,), network_mbs=12_000)
    fifo = run(trace, Fifo(), speed, ONE_A6000, topologies=(topology,))
    phalanx = run(
        trace,
        Phalanx(elastic=False, documents=(topology.document,)),
        speed,
        ONE_A6000,
        topologies=(topology,),
    )
    fifo_b = next(j for j in fifo.jobs if j.name == "b")
    phalanx_b = next(j for j in phalanx.jobs if j.name == "b")
    assert fifo_b.placements == ((60, ((0, (1, 2)),)),)
    assert fifo_b.nvlink is False
    (placed,) = phalanx_b.placements
    assert tuple(placed[1][0][1]) in BRIDGED
    assert phalanx_b.nvlink is True
    # b starts at 60: 30 s restart, then 600 s of work at 1.0 (phalanx), or at
    # T(72k) / T(24k) = (0.87 + 0.13 / 6) / (0.87 + 0.13 / 2) = 0.9537 (fifo): 629.2 s, rounded up to 630.
    assert phalanx_b.jct == 60 + 30 + 600
    assert fifo_b.jct == 60 + 30 + 630


def _job(name: str, gpus: int, nvlink: bool | None) -> JobResult:
    return JobResult(name, "rigid", 0, 100, 0, gpus=gpus, nvlink=nvlink)


def test_the_share_counts_only_jobs_where_a_linked_set_existed() -> None:
    """Two judged multi-GPU jobs, one met: 50 %; unjudged and one-GPU jobs are left out."""
    jobs = (_job("a", 2, True), _job("b", 4, False), _job("c", 2, None), _job("d", 1, None))
    row = figures(RunResult("m", "phalanx", 0, jobs, 1, capacity=8))
    assert (row.nvlink_share, row.nvlink_jobs) == (0.5, 2)
    assert " 50%" in render([row]).splitlines()[1]
    wanted = (
        "[MISSED] >= 95% of multi-GPU jobs on fully NVLink-connected sets where such a set exists: 50% of 2"
    )
    assert f"  {wanted}" in goals([row])


def test_no_judged_job_shows_a_dash() -> None:
    row = figures(RunResult("m", "phalanx", 0, (_job("a", 2, None),), 1, capacity=8))
    assert row.nvlink_share is None
    assert any("[n/a   ] >= 95% of multi-GPU jobs on fully NVLink" in line for line in goals([row]))
