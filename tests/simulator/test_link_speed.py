"""The NVLink speed model on sets of a real matrix, with every expectation worked out by hand.

The node is the 8 x RTX A6000 of ``data/topologies`` (bridges on pairs 0-1, 2-3, 4-5, 6-7; NODE
inside a socket, SYS across). The core's capacities for it (NCCL's, ``scheduling.topology.bandwidth``):
an NVLink of compute capability 8.6 is 12,000 MB/s, so a bridge (NV4) is 48,000; a Gen4 x16 PCIe link
24,000; the socket link 10,000. Hence:

- a bridged pair: the bridge plus the PCIe path beside it, 48,000 + 24,000 = 72,000;
- an unbridged pair in one socket (1, 2): one PCIe uplink, 24,000;
- a pair across sockets (0, 4): the socket link, 10,000;
- two bridged pairs in one socket (0-3): the cut between the pairs is their two uplinks, 48,000;
- two bridged pairs across sockets (0, 1, 4, 5): the socket link, 10,000.

With ``f`` = 0.13 measured at 12,000 MB/s, a step at bottleneck B takes 0.87 + 0.13 * 12,000 / B.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.topology import NodeTopology, TopologyCache, set_score
from simulator.cluster_spec import read_cluster
from simulator.link_speed import LinkSpeed
from simulator.philly import RigidSpeed
from simulator.speed import Progress
from simulator.traces import TraceJob

CLUSTERS = Path(__file__).resolve().parents[2] / "simulator" / "data" / "clusters"


def _a6000() -> NodeTopology:
    topology = read_cluster(CLUSTERS / "a6000-bridge-pairs.toml").topologies(1, TopologyCache())[0]
    assert topology is not None
    return topology


def _time(mbs: int) -> float:
    return 0.87 + 0.13 * 12_000 / mbs


@pytest.mark.parametrize(
    ("gpus", "mbs"),
    [
        pytest.param((0, 1), 72_000, id="bridged-pair"),
        pytest.param((1, 2), 24_000, id="unbridged-same-socket"),
        pytest.param((0, 4), 10_000, id="across-sockets"),
        pytest.param((0, 1, 2, 3), 48_000, id="two-pairs-one-socket"),
        pytest.param((0, 1, 4, 5), 10_000, id="two-pairs-two-sockets"),
    ],
)
def test_set_bandwidths_the_model_reads(gpus: tuple[int, ...], mbs: int) -> None:
    assert set_score(_a6000(), gpus) == mbs


@pytest.mark.parametrize(
    ("sets", "factor"),
    [
        pytest.param(((0, (0, 1)),), 1.0, id="bridged-pair-is-best"),
        pytest.param(((0, (1, 2)),), _time(72_000) / _time(24_000), id="unbridged-pair"),
        pytest.param(((0, (0, 4)),), _time(72_000) / _time(10_000), id="pair-across-sockets"),
        pytest.param(((0, (0, 1, 2, 3)),), 1.0, id="quad-in-one-socket-is-best"),
        pytest.param(((0, (0, 1, 4, 5)),), _time(48_000) / _time(10_000), id="quad-across-sockets"),
        pytest.param(((0, (1, 2)), (1, (0, 1))), 1.0, id="two-nodes-network-caps-both"),
        pytest.param(((0, (0, 4)), (1, (0, 1))), _time(12_000) / _time(10_000), id="socket-below-network"),
        pytest.param(((0, (3,)),), 1.0, id="one-gpu"),
    ],
)
def test_link_factor_on_hand_computed_sets(
    sets: tuple[tuple[int, tuple[int, ...]], ...], factor: float
) -> None:
    topology = _a6000()
    speed = LinkSpeed(RigidSpeed(8), (topology, topology), network_mbs=12_000)
    assert speed.factor(sets) == pytest.approx(factor, rel=1e-12)


def test_rate_is_the_rigid_rate_times_the_factor() -> None:
    """A 4-GPU job split 2 + 2 over two nodes: rigid 1 / 1.2; across sockets inside: x T(12k) / T(10k)."""
    topology = _a6000()
    speed = LinkSpeed(RigidSpeed(8), (topology, topology), network_mbs=12_000)
    job = TraceJob("j", 0, "rigid", 4, 1, duration=1_000)
    sets = ((0, (0, 4)), (1, (0, 4)))
    step = speed.advance_on(job, Progress(), (2, 2), sets, 60)
    expected = 60 / 1.2 * _time(12_000) / _time(10_000)
    assert step.progress.work == pytest.approx(expected, rel=1e-12)
    assert step.finished_after is None


def test_zero_fraction_makes_topology_free() -> None:
    topology = _a6000()
    speed = LinkSpeed(RigidSpeed(8), (topology,), network_mbs=12_000, comm_fraction=0.0)
    assert speed.factor(((0, (0, 4)),)) == 1.0


def test_fraction_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        LinkSpeed(RigidSpeed(8), (), network_mbs=12_000, comm_fraction=1.5)
