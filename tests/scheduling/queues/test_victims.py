from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.model import Resources
from scheduling.queues.fair_share import fair_shares
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.victims import VictimSearch, _pick, check_victims, choose_victims
from scheduling.queues.workloads import RunningGang
from scheduling.resources import amount, is_zero
from tests.scheduling.queues.builders import gang, gpu_queue, gpus


def search_for(need: int, running: list[RunningGang]) -> VictimSearch:
    """team-b borrows everything it holds (quota 0, weight 0), so any of its gangs may go."""
    tree = QueueTree.build([gpu_queue("team-a", need), gpu_queue("team-b", 0, weight=0)])
    held = sum(g.requests.gpus for g in running)
    shares = fair_shares(tree, gpus(held), {"team-a": gpus(need), "team-b": gpus(held)})
    return VictimSearch(
        "team-a", tree, shares, {"team-b": gpus(held)}, ("nvidia.com/gpu",), gpus(need), gpus(held)
    )


def youngest_first(running: list[RunningGang]) -> list[RunningGang]:
    return sorted(running, key=lambda g: (g.priority, -g.started_at, g.key))


@pytest.mark.parametrize(
    ("need", "sizes", "expected"),
    [
        pytest.param(8, [4, 4, 8], ["ml/g2"], id="exact fit, even when older"),
        pytest.param(
            8, [2, 2, 2, 2, 16], ["ml/g3", "ml/g2", "ml/g1", "ml/g0"], id="small gangs before a big one"
        ),
        pytest.param(10, [8, 16, 12], ["ml/g2"], id="least overshoot when every gang would overshoot"),
        pytest.param(10, [4, 12], ["ml/g1"], id="a gang the others make unnecessary is spared"),
        pytest.param(40, [8] * 4, None, id="not enough"),
    ],
)
def test_choose_victims(need: int, sizes: list[int], expected: list[str] | None) -> None:
    running = [gang(f"g{i}", "team-b", n, started_at=float(i)) for i, n in enumerate(sizes)]
    search = search_for(need, running)
    chosen = choose_victims(search, youngest_first(running))
    if expected is None:
        assert chosen is None
        return
    assert chosen is not None
    assert [g.key for g in chosen] == expected
    assert check_victims(search, chosen)


def test_check_victims_refuses_a_non_preemptible_gang() -> None:
    running = [gang("g0", "team-b", 8, preemptible=False)]
    assert not check_victims(search_for(8, running), running)


def scan_every_gang(search: VictimSearch, candidates: list[RunningGang]) -> list[RunningGang] | None:
    """The oracle: ``choose_victims`` as first written, judging every candidate on its own each pick."""
    chosen: list[RunningGang] = []
    taken: dict[str, Resources] = {}
    while not is_zero(search.rest(chosen)):
        rest = search.rest(chosen)
        eligible = [
            g
            for g in candidates
            if g not in chosen
            and search.keeps_share(g, taken)
            and any(amount(g.requests, r) and (amount(rest, r) or is_zero(rest)) for r in search.short)
        ]
        if not eligible:
            return None
        if search.quota_owed:
            least = min(search.below_fair_share(g, taken) for g in eligible)
            eligible = [g for g in eligible if search.below_fair_share(g, taken) == least]
        lowest = min(g.priority for g in eligible)
        pick = _pick(search, [g for g in eligible if g.priority == lowest], rest)
        chosen.append(pick)
        search.take(taken, pick)
    for gang_ in reversed(list(chosen)):
        spared = [g for g in chosen if g is not gang_]
        if is_zero(search.rest(spared)):
            chosen = spared
    return chosen


@settings(max_examples=200, deadline=None)
@given(
    gangs=st.lists(
        st.tuples(st.sampled_from(["team-b", "team-c"]), st.sampled_from([1, 2, 4, 8]), st.integers(0, 2)),
        min_size=1,
        max_size=12,
    ),
    need=st.integers(1, 24),
    quotas=st.tuples(st.integers(0, 24), st.integers(0, 24)),
    owed=st.booleans(),
)
def test_judging_each_kind_of_gang_once_chooses_what_judging_every_gang_chose(
    gangs: list[tuple[str, int, int]], need: int, quotas: tuple[int, int], owed: bool
) -> None:
    running = [
        gang(f"g{i:02}", queue, n, priority=priority, started_at=float(i))
        for i, (queue, n, priority) in enumerate(gangs)
    ]
    tree = QueueTree.build(
        [gpu_queue("team-a", need), gpu_queue("team-b", quotas[0]), gpu_queue("team-c", quotas[1])]
    )
    held = {q: gpus(sum(g.requests.gpus for g in running if g.queue == q)) for q in ("team-b", "team-c")}
    capacity = gpus(sum(h.gpus for h in held.values()) + need)
    shares = fair_shares(tree, capacity, {"team-a": gpus(need), **held})
    search = VictimSearch(
        "team-a", tree, shares, held, ("nvidia.com/gpu",), gpus(need), capacity, quota_owed=owed
    )
    candidates = youngest_first(running)
    assert choose_victims(search, candidates) == scan_every_gang(search, candidates)
