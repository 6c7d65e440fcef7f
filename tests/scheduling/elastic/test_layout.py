from __future__ import annotations

from itertools import permutations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.elastic import ElasticJob, plan_layout
from scheduling.elastic.layout import kept_running, pack_jobs
from tests.scheduling.elastic.builders import a_job


def test_a_job_spread_over_three_nodes_fits_on_one_and_keeps_most_of_its_workers() -> None:
    job = a_job("spread", ["n1", "n1", "n2", "n3"], gpus=2)
    layout = plan_layout([job], {"ml/spread": 4}, {"n1": 8, "n2": 8, "n3": 8})
    assert layout.targets == {"ml/spread": {"n1": 4}}
    assert layout.moves == {"ml/spread": 2}


def test_a_shrinking_job_is_laid_out_from_the_workers_it_keeps() -> None:
    job = a_job("shrink", ["n1", "n1", "n2", "n2"], gpus=2)
    layout = plan_layout([job], {"ml/shrink": 2}, {"n1": 8, "n2": 8})
    assert layout.targets == {"ml/shrink": {"n1": 2}}
    assert layout.moves == {"ml/shrink": 0}


def test_more_workers_than_room_are_reported_unplaced() -> None:
    job = a_job("big", [], gpus=4)
    layout = plan_layout([job], {"ml/big": 5}, {"n1": 8, "n2": 8})
    assert layout.unplaced == {"ml/big": 1}
    assert sum(layout.targets["ml/big"].values()) == 4


def _moves(
    jobs: list[ElasticJob], sizes: dict[str, int], bins: list[dict[str, int]], nodes: dict[str, str]
) -> int:
    total = 0
    for job in jobs:
        target: dict[str, int] = {}
        for b, node in nodes.items():
            if bins[int(b)].get(job.key):
                target[node] = bins[int(b)][job.key]
        current = kept_running(job, sizes[job.key], set(nodes.values()))
        total += sum(max(0, count - target.get(node, 0)) for node, count in current.items())
    return total


placements = st.lists(
    st.lists(st.sampled_from(["n0", "n1", "n2", "n3", None]), max_size=4), min_size=1, max_size=3
)


@settings(max_examples=150, deadline=None)
@given(
    placements,
    st.lists(st.integers(0, 8), min_size=4, max_size=4),
    st.lists(st.integers(0, 4), min_size=3, max_size=3),
)
def test_the_matching_moves_no_more_workers_than_any_other_matching_of_the_packing(
    on: list[list[str | None]], rooms: list[int], grow: list[int]
) -> None:
    """Brute force over every way to put the virtual nodes on the real ones (4! of them)."""
    jobs = [a_job(f"j{i}", nodes, gpus=1) for i, nodes in enumerate(on)]
    room = {f"n{i}": r for i, r in enumerate(rooms)}
    for job in jobs:  # a job's running workers are room it may keep
        for node, count in job.running_on().items():
            room[node] += count
    sizes = {job.key: max(1, job.size + grow[i] - 2) for i, job in enumerate(jobs)}
    layout = plan_layout(jobs, sizes, room)
    bins, _ = pack_jobs(jobs, sizes, room)
    names = sorted(room)
    best = None
    for order in permutations(names):
        fits = all(sum(bins[b].values()) <= room[order[b]] for b in range(len(bins)))
        if fits:
            moves = _moves(jobs, sizes, bins, {str(b): order[b] for b in range(len(bins))})
            best = moves if best is None else min(best, moves)
    assert best is not None, "the identity always fits"
    assert sum(layout.moves.values()) == best
    assert layout == plan_layout(list(reversed(jobs)), sizes, room), "deterministic, whatever the order"


def test_among_equally_few_moves_a_job_stays_in_its_home_rack() -> None:
    job = a_job("grow", ["n1", "n1"], gpus=2)
    room = {"n1": 8, "n2": 8, "n3": 8}
    racked = plan_layout([job], {"ml/grow": 6}, room, {"n1": "a", "n2": "b", "n3": "a"})
    assert racked.targets == {"ml/grow": {"n1": 4, "n3": 2}}
    assert racked.moves == {"ml/grow": 0}
    assert plan_layout([job], {"ml/grow": 6}, room, {"n1": "a", "n2": "a", "n3": "b"}).targets == {
        "ml/grow": {"n1": 4, "n2": 2}
    }
