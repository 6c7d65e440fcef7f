from __future__ import annotations

import pytest

from scheduling.queues.fair_share import fair_shares
from scheduling.queues.queue_tree import QueueTree
from scheduling.queues.victims import VictimSearch, check_victims, choose_victims
from scheduling.queues.workloads import RunningGang
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
