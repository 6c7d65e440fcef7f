from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.model import Resources
from scheduling.queues.fair_share import Claim, FairShares, divide, fair_shares
from scheduling.queues.queue_tree import DEFAULT_QUEUE, Queue, QueueTree, ResourceQuota
from scheduling.queues.recent_usage import UsageWeighting
from tests.scheduling.queues.builders import gpu_queue, gpus


def gpu_shares(result: FairShares, *names: str) -> list[tuple[int, int]]:
    return [(result[n].deserved.gpus, result[n].fair_share.gpus) for n in names]


# --- the worked example and small tables ------------------------------------------------------------


def test_runai_worked_example() -> None:
    """Run:ai docs: 20 unused GPUs, over-quota weights 2, 3, 1; the second project (quota 6) gets 16.

    The docs give the second project's quota (6) and the 20 unused GPUs; the other quotas (4 and 2)
    are ours, chosen so that quotas + 20 is the cluster (32 GPUs) and every project wants more.
    """
    tree = QueueTree.build(
        [gpu_queue("p1", 4, weight=2), gpu_queue("p2", 6, weight=3), gpu_queue("p3", 2, weight=1)]
    )
    demand = {name: gpus(100) for name in ("p1", "p2", "p3")}
    result = fair_shares(tree, gpus(32), demand)
    assert result["p2"].over_quota.gpus == 10  # 3/6 x 20
    assert result["p2"].fair_share.gpus == 16  # 6 + 10
    assert gpu_shares(result, "p1", "p2", "p3") == [(4, 11), (6, 16), (2, 5)]  # 6.67 -> 7, 3.33 -> 3
    assert result[DEFAULT_QUEUE].fair_share.gpus == 0  # the default queue asked for nothing


@pytest.mark.parametrize(
    ("capacity", "claims", "expected"),
    [
        pytest.param(
            10, [("a", 4, 1, 2), ("b", 4, 1, 20)], {"a": (2, 2), "b": (4, 8)}, id="unused quota is lent"
        ),
        pytest.param(
            12,
            [("a", 8, 1, 20), ("b", 8, 1, 20)],
            {"a": (6, 6), "b": (6, 6)},
            id="over-subscribed quotas scale",
        ),
        pytest.param(
            6,
            [("a", 6, 1, 20), ("b", 2, 1, 20), ("c", 4, 1, 1)],
            {"a": (4, 4), "b": (1, 1), "c": (1, 1)},
            id="scaling by quota water-fills what a small claim leaves",
        ),
        pytest.param(
            10, [("a", 0, 0, 20), ("b", 0, 1, 3)], {"a": (0, 0), "b": (0, 3)}, id="weight 0 borrows nothing"
        ),
        pytest.param(
            10,
            [("a", 0, 1, 20), ("b", 0, 1, 20), ("c", 0, 1, 20)],
            {"a": (0, 4), "b": (0, 3), "c": (0, 3)},
            id="a tie in remainders goes by name",
        ),
        pytest.param(
            24,
            [("a", 8, 1, 24), ("b", 8, 1, 24), ("c", 0, 2, 24)],
            {"a": (8, 10), "b": (8, 10), "c": (0, 4)},
            id="the issue's end-to-end queues",
        ),
        pytest.param(
            24,
            [("a", 0, 1, 24), ("b", 0, 1, 24), ("c", 0, 2, 24)],
            {"a": (0, 6), "b": (0, 6), "c": (0, 12)},
            id="weights alone",
        ),
        pytest.param(0, [("a", 4, 1, 4)], {"a": (0, 0)}, id="nothing to divide"),
    ],
)
def test_divide(
    capacity: int, claims: list[tuple[str, int, int, int]], expected: dict[str, tuple[int, int]]
) -> None:
    result = divide(capacity, [Claim(*c) for c in claims])
    assert {name: (s.deserved, s.fair_share) for name, s in result.items()} == expected


def test_divide_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="capacity must be 0 or more"):
        divide(-1, [])
    with pytest.raises(ValueError, match="more than once"):
        divide(4, [Claim("a", 1, 1, 1), Claim("a", 1, 1, 1)])


def test_limit_caps_the_share_and_the_rest_goes_round_again() -> None:
    tree = QueueTree.build([gpu_queue("a", 2, weight=5, limit=4), gpu_queue("b", 2, weight=1)])
    result = fair_shares(tree, gpus(20), {"a": gpus(50), "b": gpus(50)})
    assert gpu_shares(result, "a", "b") == [(2, 4), (2, 16)]
    assert result["a"].wants.gpus == 4


def test_three_level_hierarchy() -> None:
    tree = QueueTree.build(
        [
            gpu_queue("org", 24, weight=1),
            gpu_queue("research", 12, weight=1, parent="org"),
            gpu_queue("vision", 8, weight=1, parent="research"),
            gpu_queue("nlp", 4, weight=3, parent="research"),
            gpu_queue("prod", 12, weight=1, parent="org"),
            gpu_queue("other", 8, weight=1),
        ]
    )
    demand = {"vision": gpus(40), "nlp": gpus(40), "prod": gpus(2), "other": gpus(4)}
    result = fair_shares(tree, gpus(40), demand)
    # top level: org deserves 24, other 4 (its demand); the 12 left go to org (other wants no more)
    assert gpu_shares(result, "org", "other") == [(24, 36), (4, 4)]
    # org's 36: prod needs only 2, research gets 12 + 22
    assert gpu_shares(result, "research", "prod") == [(12, 34), (2, 2)]
    # research's 34: quotas 8 + 4, the 22 left split 1 : 3
    assert gpu_shares(result, "vision", "nlp") == [
        (8, 13),
        (4, 21),
    ]  # 5.5 and 16.5: the tie goes to nlp by name
    assert result["research"].wants.gpus == 80


def test_a_parent_takes_only_what_its_children_can_use() -> None:
    """A weight-0 child cannot borrow, so its parent does not claim more than the child's quota for it."""
    tree = QueueTree.build(
        [gpu_queue("org", 4), gpu_queue("team", 4, weight=0, parent="org"), gpu_queue("b", 0)]
    )
    result = fair_shares(tree, gpus(20), {"team": gpus(20), "b": gpus(20)})
    assert gpu_shares(result, "org", "team", "b") == [(4, 4), (4, 4), (0, 16)]


def test_cpu_and_memory_are_divided_on_their_own() -> None:
    tree = QueueTree.build(
        [
            Queue("a", cpu=ResourceQuota(4000, 1, None), memory=ResourceQuota(2**30, 1, None)),
            Queue("b", cpu=ResourceQuota(0, 3, None)),
        ]
    )
    capacity = Resources(milli_cpu=8000, memory=4 * 2**30, gpus=0)
    result = fair_shares(tree, capacity, {"a": Resources(8000, 8 * 2**30), "b": Resources(8000, 0)})
    assert result["a"].fair_share == Resources(milli_cpu=5000, memory=4 * 2**30)
    assert result["b"].fair_share == Resources(milli_cpu=3000)


def test_demand_must_name_leaf_queues() -> None:
    tree = QueueTree.build([gpu_queue("org", 4), gpu_queue("team", 4, parent="org")])
    with pytest.raises(ValueError, match="demand for queue org, which is not a leaf queue"):
        fair_shares(tree, gpus(8), {"org": gpus(1)})
    with pytest.raises(ValueError, match="negative"):
        fair_shares(tree, gpus(8), {"team": gpus(-1)})


def test_usage_weighting_is_off_by_default_and_moves_only_the_over_quota_part() -> None:
    tree = QueueTree.build([gpu_queue("a", 2), gpu_queue("b", 2)])
    demand = {"a": gpus(50), "b": gpus(50)}
    plain = fair_shares(tree, gpus(20), demand)
    assert gpu_shares(plain, "a", "b") == [(2, 10), (2, 10)]
    assert fair_shares(tree, gpus(20), demand, usage=UsageWeighting({"a": 0.0, "b": 0.0})) == plain
    # a used half the cluster lately, b nothing: w~ = 1/2, share weights max(0, 1/2 + (1/2 - u))
    weighted = fair_shares(tree, gpus(20), demand, usage=UsageWeighting({"a": 0.5}, k=1.0))
    assert gpu_shares(weighted, "a", "b") == [(2, 7), (2, 13)]  # 16 x 1/3 = 5.33 and 16 x 2/3 = 10.67


# --- properties ---------------------------------------------------------------------------------------


@st.composite
def flat_cases(draw: st.DrawFn) -> tuple[list[Queue], dict[str, Resources], int]:
    count = draw(st.integers(1, 6))
    queues, demand = [], {}
    for i in range(count):
        quota = draw(st.integers(0, 20))
        limit = draw(st.none() | st.integers(quota, quota + 30))
        queues.append(gpu_queue(f"q{i}", quota, weight=draw(st.integers(0, 5)), limit=limit))
        demand[f"q{i}"] = gpus(draw(st.integers(0, 60)))
    return queues, demand, draw(st.integers(0, 120))


@st.composite
def tree_cases(draw: st.DrawFn) -> tuple[list[Queue], dict[str, Resources], int]:
    """Up to three levels; children's quotas never sum over their parent's."""
    queues: list[Queue] = []
    demand: dict[str, Resources] = {}

    def add(name: str, parent: str | None, budget: int, depth: int) -> int:
        quota = draw(st.integers(0, budget))
        limit = draw(st.none() | st.integers(quota, quota + 40))
        queues.append(gpu_queue(name, quota, weight=draw(st.integers(0, 4)), limit=limit, parent=parent))
        kids = draw(st.integers(0, 3)) if depth < 3 else 0
        if not kids:
            demand[name] = gpus(draw(st.integers(0, 50)))
        left = quota
        for k in range(kids):
            left -= add(f"{name}.{k}", name, left, depth + 1)
        return quota

    for r in range(draw(st.integers(1, 3))):
        add(f"r{r}", None, 30, 1)
    return queues, demand, draw(st.integers(0, 150))


def check_bounds(tree: QueueTree, result: FairShares, capacity: int, demand: dict[str, Resources]) -> None:
    assert sum(result[r].fair_share.gpus for r in tree.roots) <= capacity
    for name, queue in tree.queues.items():
        share = result[name]
        assert 0 <= share.deserved.gpus <= share.fair_share.gpus
        assert share.deserved.gpus <= queue.gpu.quota
        if queue.gpu.limit is not None:
            assert share.fair_share.gpus <= queue.gpu.limit
        if tree.is_leaf(name):
            assert share.fair_share.gpus <= demand.get(name, gpus(0)).gpus
        else:
            assert sum(result[k].fair_share.gpus for k in tree.children[name]) <= share.fair_share.gpus


@settings(max_examples=300, deadline=None)
@given(flat_cases())
def test_flat_shares_respect_capacity_limits_and_demand(
    case: tuple[list[Queue], dict[str, Resources], int],
) -> None:
    queues, demand, capacity = case
    tree = QueueTree.build(queues)
    result = fair_shares(tree, gpus(capacity), demand)
    check_bounds(tree, result, capacity, demand)
    # work-conserving: capacity runs out, or every queue that can borrow has all it wants
    usable = sum(
        result[q.name].wants.gpus
        if q.gpu.over_quota_weight > 0
        else min(q.gpu.quota, result[q.name].wants.gpus)
        for q in queues
    )
    assert sum(result[q.name].fair_share.gpus for q in queues) == min(capacity, usable)


@settings(max_examples=300, deadline=None)
@given(tree_cases())
def test_tree_shares_respect_capacity_limits_and_demand(
    case: tuple[list[Queue], dict[str, Resources], int],
) -> None:
    queues, demand, capacity = case
    tree = QueueTree.build(queues)
    check_bounds(tree, fair_shares(tree, gpus(capacity), demand), capacity, demand)


@settings(max_examples=300, deadline=None)
@given(tree_cases())
def test_demand_within_quota_is_met_when_quotas_fit(
    case: tuple[list[Queue], dict[str, Resources], int],
) -> None:
    queues, demand, capacity = case
    tree = QueueTree.build(queues)
    capacity = max(capacity, sum(tree[r].gpu.quota for r in tree.roots))
    result = fair_shares(tree, gpus(capacity), demand)
    for name, wanted in demand.items():
        if wanted.gpus <= tree[name].gpu.quota:
            assert result[name].fair_share.gpus == wanted.gpus
            assert result[name].deserved.gpus == wanted.gpus


@settings(max_examples=300, deadline=None)
@given(tree_cases(), st.data())
def test_more_weight_never_means_less_share(
    case: tuple[list[Queue], dict[str, Resources], int], data: st.DataObject
) -> None:
    queues, demand, capacity = case
    index = data.draw(st.integers(0, len(queues) - 1))
    heavier = list(queues)
    gpu = heavier[index].gpu
    heavier[index] = replace(
        heavier[index],
        gpu=replace(gpu, over_quota_weight=gpu.over_quota_weight + data.draw(st.integers(1, 5))),
    )
    name = queues[index].name
    before = fair_shares(QueueTree.build(queues), gpus(capacity), demand)[name].fair_share.gpus
    after = fair_shares(QueueTree.build(heavier), gpus(capacity), demand)[name].fair_share.gpus
    assert after >= before


@settings(max_examples=200, deadline=None)
@given(tree_cases(), st.data())
def test_same_input_same_output_in_any_order(
    case: tuple[list[Queue], dict[str, Resources], int], data: st.DataObject
) -> None:
    queues, demand, capacity = case
    shuffled = data.draw(st.permutations(queues))
    first = fair_shares(QueueTree.build(queues), gpus(capacity), demand)
    again = fair_shares(QueueTree.build(shuffled), gpus(capacity), dict(reversed(list(demand.items()))))
    assert first == again
