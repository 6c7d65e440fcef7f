from __future__ import annotations

from itertools import combinations

import pytest

from scheduling.topology import BandwidthModel, prepare_topology
from scheduling.topology.graph import set_bandwidth

from .shared_files import MATRICES, SharedMatrix, document, topology

SMALL = [m for m in MATRICES if m.gpus <= 8]


@pytest.mark.parametrize("matrix", SMALL, ids=lambda m: m.name)
def test_bounds_bracket_the_exact_bandwidth_of_every_set(matrix: SharedMatrix) -> None:
    node = topology(matrix.name)
    for size in range(2, matrix.gpus + 1):
        for members in combinations(range(matrix.gpus), size):
            exact = set_bandwidth(node.graph, members)
            assert node.lower_bound(members) <= exact <= node.upper_bound(members), members
            assert node.set_mbs(members) == exact


def test_bounds_on_the_16_gpu_node() -> None:
    node = topology("dgx2-v100-partial")
    for members in [(0, 1), (0, 1, 2, 3), (0, 4), (0, 1, 4, 9), tuple(range(8)), (3, 4, 5, 6, 7, 8, 9, 10)]:
        exact = set_bandwidth(node.graph, members)
        assert node.lower_bound(members) <= exact <= node.upper_bound(members)
        assert node.set_mbs(members) == exact


@pytest.mark.parametrize("matrix", MATRICES, ids=lambda m: m.name)
def test_pair_table_is_symmetric_and_positive(matrix: SharedMatrix) -> None:
    node = topology(matrix.name)
    for a, b in combinations(range(matrix.gpus), 2):
        assert node.pair_mbs[a][b] == node.pair_mbs[b][a] > 0


def test_identity_is_the_fingerprint() -> None:
    again = prepare_topology(document("a6000-8"))
    assert again == topology("a6000-8")
    assert hash(again) == hash(topology("a6000-8"))
    assert again != topology("a30-bridged")
    assert prepare_topology(document("a6000-8"), BandwidthModel(inter_socket=24_000)) != again
    assert again != "a6000-8"


def test_locality_groups() -> None:
    assert topology("a6000-8").locality == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topology("v100-cubemesh").locality == (0, 0, 0, 0, 1, 1, 1, 1)
    assert topology("dgx-a100-partial").locality == (0, 0, 1, 1, 2, 2, 3, 4)
