"""NVLink islands of free GPUs on the published topologies, and their defining property on every subset."""

from __future__ import annotations

from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.topology import TopologyDocument
from scheduling.topology.islands import nvlink_islands
from tests.scheduling.topology.shared_files import document


@pytest.mark.parametrize(
    ("name", "free", "islands"),
    [
        ("a6000-8", range(8), ((0, 1), (2, 3), (4, 5), (6, 7))),
        ("a6000-8", (1, 2, 3, 6, 7), ((2, 3), (6, 7), (1,))),
        ("a30-bridged", (0, 1, 3), ((0, 1), (3,))),
        ("v100-cubemesh", range(8), (tuple(range(8)),)),
        ("v100-cubemesh", (0, 3, 5, 6), ((0, 3), (5, 6))),
        ("v100-cubemesh", (1, 4), ((1,), (4,))),
        ("p4d-a100", (0, 5, 7), ((0, 5, 7),)),
        ("l40s-8", (0, 1, 2), ((0,), (1,), (2,))),
        ("a6000-8", (), ()),
    ],
    ids=[
        "bridged-all",
        "bridged-broken-pair",
        "a30",
        "cubemesh-all",
        "cubemesh-two",
        "cubemesh-apart",
        "nvswitch",
        "pcie-only",
        "none-free",
    ],
)
def test_islands_on_published_machines(
    name: str, free: tuple[int, ...], islands: tuple[tuple[int, ...], ...]
) -> None:
    assert nvlink_islands(document(name), free) == islands


def test_indices_beyond_the_document_are_ignored() -> None:
    assert nvlink_islands(document("a30-bridged"), (1, 0, 9, -1)) == ((0, 1),)


def _nvlinked(doc: TopologyDocument, a: int, b: int) -> bool:
    if doc.nvswitch:
        return doc.nvlink_count(a) > 0 and doc.nvlink_count(b) > 0
    link = doc.link(a, b)
    return link is not None and link.nvlinks > 0


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["a6000-8", "v100-cubemesh", "p4d-a100", "a30-bridged", "l40s-8"]),
    mask=st.integers(0, 255),
)
def test_islands_partition_the_free_gpus_into_nvlink_connected_groups(name: str, mask: int) -> None:
    doc = document(name)
    free = [g for g in range(doc.gpu_count) if mask >> g & 1]
    islands = nvlink_islands(doc, free)
    assert sorted(g for island in islands for g in island) == free, "every free GPU in exactly one island"
    for island in islands:
        reached = {island[0]}
        frontier = [island[0]]
        while frontier:  # NVLink through free GPUs of the island reaches all of it
            a = frontier.pop()
            for b in island:
                if b not in reached and _nvlinked(doc, a, b):
                    reached.add(b)
                    frontier.append(b)
        assert reached == set(island)
    for one, other in combinations(islands, 2):
        assert not any(_nvlinked(doc, a, b) for a in one for b in other), "no NVLink joins two islands"
    assert [len(i) for i in islands] == sorted((len(i) for i in islands), reverse=True)
