from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.model import Resources
from scheduling.queues.fair_share import fair_shares
from scheduling.queues.ordering import Standing, order_pending, queue_states, standing
from scheduling.queues.queue_tree import Queue, QueueTree
from scheduling.queues.workloads import PendingGroup
from tests.scheduling.queues.builders import gpu_queue, gpus, group, states_for

TEAMS = [gpu_queue("team-a", 8), gpu_queue("team-b", 8), gpu_queue("team-c", 0, weight=2)]
OLD, MID, NEW = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"


@dataclass(frozen=True)
class Case:
    name: str
    groups: tuple[PendingGroup, ...]
    order: tuple[str, ...]
    allocated: dict[str, int] = field(default_factory=dict)
    queues: tuple[Queue, ...] = tuple(TEAMS)
    capacity: int = 24


CASES = [
    Case(
        "within deserved quota beats an older group over its fair share",
        (group("c1", "team-c", 8, created=OLD), group("a1", "team-a", 8, created=NEW)),
        ("ml/a1", "ml/c1"),
        allocated={"team-c": 16},
    ),
    Case(
        "within fair share beats over fair share",
        (group("c1", "team-c", 4, created=OLD), group("b1", "team-b", 4, created=NEW)),
        ("ml/c1", "ml/b1"),
        allocated={"team-b": 16, "team-c": 4},
    ),
    Case(
        "within a queue: priority, then age, then name",
        (
            group("a-low", "team-a", 1, priority=0, created=OLD),
            group("a-high", "team-a", 1, priority=50, created=NEW),
            group("a-y", "team-a", 1, priority=0, created=MID),
            group("a-x", "team-a", 1, priority=0, created=MID),
        ),
        ("ml/a-high", "ml/a-low", "ml/a-x", "ml/a-y"),
    ),
    Case(
        "two equal queues take turns rather than first come, first served",
        tuple(
            group(f"{t}{i}", f"team-{t}", 4, created=f"2026-01-0{i}T00:00:00Z")
            for t in "ab"
            for i in (1, 2, 3)
        ),
        ("ml/a1", "ml/b1", "ml/a2", "ml/b2", "ml/a3", "ml/b3"),
    ),
    Case(
        "same standing: the smaller dominant share goes first, even when younger",
        (group("x1", "x", 2, created=OLD), group("y1", "y", 2, created=NEW)),
        ("ml/y1", "ml/x1"),
        allocated={"x": 6, "y": 2},
        queues=(gpu_queue("x", 0), gpu_queue("y", 0)),
        capacity=40,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_order_pending(case: Case) -> None:
    demand: dict[str, int] = dict(case.allocated)
    for g in case.groups:
        demand[g.queue] = demand.get(g.queue, 0) + g.requests.gpus
    states = states_for(list(case.queues), case.capacity, demand, case.allocated)
    ordered = order_pending(case.groups, states, gpus(case.capacity))
    assert tuple(g.key for g in ordered) == case.order
    assert order_pending(reversed(case.groups), states, gpus(case.capacity)) == ordered


def test_standing_bands() -> None:
    states = states_for(TEAMS, 24, {"team-a": 12, "team-c": 12}, {"team-a": 4, "team-c": 8})
    # team-a: deserved 8, fair share 12 (8 + 4 of the 8 unused: weights 1 : 2 between a and c)
    assert states["team-a"].fair_share.gpus == 12
    assert standing(states["team-a"], gpus(4)) is Standing.WITHIN_DESERVED
    assert standing(states["team-a"], gpus(8)) is Standing.WITHIN_FAIR_SHARE
    assert standing(states["team-a"], gpus(9)) is Standing.OVER_FAIR_SHARE
    assert standing(states["team-c"], gpus(4)) is Standing.WITHIN_FAIR_SHARE


def test_a_team_in_a_department_over_its_fair_share_is_over_too() -> None:
    queues = [
        gpu_queue("org", 8),
        gpu_queue("t1", 4, parent="org"),
        gpu_queue("t2", 4, parent="org"),
        gpu_queue("other", 8),
    ]
    states = states_for(queues, 16, {"t1": 4, "t2": 6, "other": 8}, {"t1": 2, "t2": 6})
    assert states["org"].allocated.gpus == 8
    assert states["t1"].fair_share.gpus == 4
    assert standing(states["t1"], gpus(2)) is Standing.OVER_FAIR_SHARE  # org would hold 10 of its 8


def test_a_group_of_an_unknown_queue_is_an_error() -> None:
    states = states_for(TEAMS, 24, {}, {})
    with pytest.raises(ValueError, match="group ml/z names queue nowhere, which has no state"):
        order_pending([group("z", "nowhere", 1)], states, gpus(24))


def test_cpu_of_a_gpu_job_does_not_make_it_over_quota_when_only_gpus_have_quotas() -> None:
    tree = QueueTree.build(TEAMS)
    job = Resources(milli_cpu=8000, memory=2**30, gpus=4)
    capacity = Resources(milli_cpu=96_000, memory=2**40, gpus=24)
    states = queue_states(tree, fair_shares(tree, capacity, {"team-a": job}), {})
    assert states["team-a"].quota_resources == ("nvidia.com/gpu",)
    assert states["team-a"].deserved == gpus(4)
    assert standing(states["team-a"], job) is Standing.WITHIN_DESERVED
