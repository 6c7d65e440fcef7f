from __future__ import annotations

import pytest

from scheduling.topology import BandwidthModel
from scheduling.topology.graph import SWITCH, build_graph, gpu_vertex, set_bandwidth

from .shared_files import document, topology

# Capacities: NCCL per-link NVLink (SM70/80 20 GB/s, SM86 12, SM90 20.6), PCIe x16 Gen3 12 / Gen4 24 /
# Gen5 48, inter-socket 10 (docs/design/nvlink-topology.md §4.2); values below are worked out by
# hand from them.
SET_BANDWIDTH = [
    pytest.param("v100-cubemesh", (0, 1), 20_000 + 12_000, id="cube-nv1-pair"),
    pytest.param("v100-cubemesh", (0, 3), 40_000 + 12_000, id="cube-nv2-pair"),
    pytest.param("v100-cubemesh", (0, 4), 40_000 + 10_000, id="cube-nv2-across-sockets"),
    pytest.param("v100-cubemesh", (0, 5), 10_000, id="cube-sys-pair"),
    pytest.param("v100-cubemesh", (0, 1, 2, 3), 80_000 + 12_000, id="cube-socket-quad"),
    pytest.param("v100-cubemesh", (0, 1, 4, 5), 40_000 + 24_000, id="cube-mixed-quad"),
    pytest.param("v100-cubemesh", tuple(range(8)), 6 * 20_000 + 10_000, id="cube-all"),
    pytest.param("a6000-8", (0, 1), 4 * 12_000 + 24_000, id="a6000-bridge"),
    pytest.param("a6000-8", (0, 2), 24_000, id="a6000-same-socket"),
    pytest.param("a6000-8", (1, 6), 10_000, id="a6000-across-sockets"),
    pytest.param("a6000-8", (0, 1, 2, 3), 2 * 24_000, id="a6000-two-bridges"),
    pytest.param("a30-bridged", (2, 3), 4 * 20_000 + 24_000, id="a30-bridge"),
    pytest.param("p4d-a100", (0, 1), 12 * 20_000 + 24_000, id="p4d-same-socket"),
    pytest.param("p4d-a100", (0, 4), 12 * 20_000 + 10_000, id="p4d-across-sockets"),
    pytest.param("hgx-h100-partial", (0, 1), 18 * 20_600 + 48_000, id="h100-same-socket"),
    pytest.param("hgx-h100-partial", (3, 4), 18 * 20_600 + 10_000, id="h100-across-sockets"),
    pytest.param("dgx2-v100-partial", (0, 1), 6 * 20_000 + 12_000, id="dgx2-same-cpus"),
    pytest.param("l40s-8", (4, 5, 6, 7), 24_000, id="l40s-socket-quad"),
    pytest.param("l40s-8", (0, 1, 4), 10_000, id="l40s-across-sockets"),
    pytest.param("rtx4090-all-sys", (0, 1), 10_000, id="all-sys"),
    pytest.param("g6e-l40s", (2,), 0, id="one-gpu"),
]


@pytest.mark.parametrize(("name", "members", "expected"), SET_BANDWIDTH)
def test_set_bandwidth(name: str, members: tuple[int, ...], expected: int) -> None:
    assert set_bandwidth(topology(name).graph, members) == expected


def test_bridged_node_graph() -> None:
    graph = build_graph(document("a6000-8"), BandwidthModel())
    assert graph.edges[gpu_vertex(0), gpu_vertex(1)] == {"capacity": 48_000, "kind": "nvlink"}
    assert graph.edges[gpu_vertex(1), gpu_vertex(0)]["capacity"] == 48_000
    assert not graph.has_edge(gpu_vertex(0), gpu_vertex(2))
    assert SWITCH not in graph
    kinds = sorted(data["kind"] for _, _, data in graph.edges(data=True))
    assert kinds.count("cpu") == 4  # two sockets, both directions
    assert kinds.count("nvlink") == 8


def test_nvswitch_node_graph() -> None:
    graph = build_graph(document("p4d-a100"), BandwidthModel())
    assert all(graph.edges[gpu_vertex(g), SWITCH]["capacity"] == 240_000 for g in range(8))
    assert not any(data["kind"] == "nvlink" for _, _, data in graph.edges(data=True))


def test_partial_nvswitch_gpus_still_reach_the_switch() -> None:
    graph = build_graph(document("dgx-a100-partial"), BandwidthModel())
    assert graph.edges[gpu_vertex(7), SWITCH]["capacity"] == 240_000
