from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduling.queues.model import DEFAULT_QUEUE, Queue, QueueError, QueueTree, ResourceQuota
from tests.scheduling.queues.builders import gpu_queue


@dataclass(frozen=True)
class Invalid:
    name: str
    queues: tuple[Queue, ...]
    problems: tuple[str, ...]
    holding: tuple[str, ...] = ()


INVALID = [
    Invalid(
        "negative quota",
        (gpu_queue("team-a", -1),),
        ("queue team-a: nvidia.com/gpu quota is -1; it must be 0 or more",),
    ),
    Invalid(
        "negative weight",
        (gpu_queue("team-a", 4, weight=-2),),
        ("queue team-a: nvidia.com/gpu overQuotaWeight is -2; it must be 0 or more",),
    ),
    Invalid(
        "limit below quota",
        (gpu_queue("team-a", 8, limit=4),),
        ("queue team-a: nvidia.com/gpu limit 4 is below its quota 8",),
    ),
    Invalid(
        "negative limit",
        (Queue("team-a", cpu=ResourceQuota(0, 1, -1000)),),
        ("queue team-a: cpu limit is -1; it must be 0 or more",),
    ),
    Invalid(
        "memory limit below quota, in Gi",
        (Queue("team-a", memory=ResourceQuota(16 * 2**30, 1, 8 * 2**30)),),
        ("queue team-a: memory limit 8Gi is below its quota 16Gi",),
    ),
    Invalid(
        "negative minimum runtime",
        (gpu_queue("team-a", min_runtime=-5),),
        ("queue team-a: minRuntimeSeconds is -5; it must be 0 or more",),
    ),
    Invalid(
        "unknown parent",
        (gpu_queue("team-a", parent="org"),),
        ("queue team-a: parent org does not exist",),
    ),
    Invalid(
        "parent is itself",
        (gpu_queue("team-a", parent="team-a"),),
        ("queue team-a: parent names the queue itself",),
    ),
    Invalid(
        "three-queue cycle",
        (gpu_queue("b", parent="c"), gpu_queue("c", parent="a"), gpu_queue("a", parent="b")),
        ("queues a, b, c form a parent cycle (a -> b -> c -> a)",),
    ),
    Invalid(
        "cycle hanging off a valid root still reported once",
        (
            gpu_queue("root"),
            gpu_queue("x", parent="y"),
            gpu_queue("y", parent="x"),
            gpu_queue("z", parent="x"),
        ),
        ("queues x, y form a parent cycle (x -> y -> x)",),
    ),
    Invalid(
        "children's quotas over the parent's",
        (gpu_queue("org", 10), gpu_queue("team-a", 8, parent="org"), gpu_queue("team-b", 4, parent="org")),
        (
            "queue org: its children's nvidia.com/gpu quotas sum to 12 (team-a 8, team-b 4), "
            "over its own quota 10",
        ),
    ),
    Invalid(
        "a queue holding workloads gets children",
        (gpu_queue("org", 8), gpu_queue("team-a", 8, parent="org")),
        ("queue org: holds workloads but has child queues (team-a); only leaf queues hold workloads",),
        holding=("org", "team-a"),
    ),
    Invalid(
        "the default queue gets children",
        (gpu_queue("team-a", parent=DEFAULT_QUEUE),),
        (
            "queue default: the default queue takes workloads that name no queue, "
            "so it cannot have child queues",
        ),
    ),
    Invalid(
        "duplicate name",
        (gpu_queue("team-a", 1), gpu_queue("team-a", 2)),
        ("queue team-a: defined more than once",),
    ),
    Invalid(
        "every problem is listed, sorted by queue",
        (gpu_queue("b", -1), gpu_queue("a", 2, limit=1), gpu_queue("c", parent="nowhere")),
        (
            "queue a: nvidia.com/gpu limit 1 is below its quota 2",
            "queue b: nvidia.com/gpu quota is -1; it must be 0 or more",
            "queue c: parent nowhere does not exist",
        ),
    ),
]


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid_queues_are_rejected_with_every_problem(case: Invalid) -> None:
    with pytest.raises(QueueError) as raised:
        QueueTree.build(case.queues, holding_workloads=case.holding)
    assert raised.value.problems == case.problems
    assert str(raised.value) == "; ".join(case.problems)


def test_default_queue_is_added_when_absent() -> None:
    tree = QueueTree.build([gpu_queue("team-a", 8)])
    assert tree.roots == (DEFAULT_QUEUE, "team-a")
    default = tree[DEFAULT_QUEUE]
    assert (default.gpu.quota, default.gpu.over_quota_weight, default.gpu.limit) == (0, 1, None)
    assert tree.workload_queue(None) == DEFAULT_QUEUE
    assert tree.workload_queue("") == DEFAULT_QUEUE


def test_a_given_default_queue_is_kept() -> None:
    tree = QueueTree.build([gpu_queue(DEFAULT_QUEUE, 2, weight=3)])
    assert tree[DEFAULT_QUEUE].gpu == ResourceQuota(2, 3, None)


def test_hierarchy_queries() -> None:
    tree = QueueTree.build(
        [
            gpu_queue("org", 16, min_runtime=600),
            gpu_queue("research", 8, parent="org"),
            gpu_queue("vision", 4, parent="research", min_runtime=60),
            gpu_queue("nlp", 4, parent="research"),
            gpu_queue("prod", 8, parent="org"),
        ]
    )
    assert tree.path("vision") == ("org", "research", "vision")
    assert tree.children["research"] == ("nlp", "vision")
    assert tree.is_leaf("vision")
    assert not tree.is_leaf("research")
    assert tree.leaves() == (DEFAULT_QUEUE, "nlp", "prod", "vision")
    assert tree.min_runtime_seconds("vision") == 60
    assert tree.min_runtime_seconds("nlp") == 600
    assert tree.min_runtime_seconds(DEFAULT_QUEUE) == 0
    assert tree.quota_resources == ("nvidia.com/gpu",)
    assert tree.workload_queue("nlp") == "nlp"
    with pytest.raises(QueueError, match="queue research has child queues"):
        tree.workload_queue("research")
    with pytest.raises(QueueError, match="queue nowhere does not exist"):
        tree.workload_queue("nowhere")


def test_queue_settings_by_resource_name() -> None:
    queue = Queue("q", gpu=ResourceQuota(4, 2, 8), cpu=ResourceQuota(2000, 1, None))
    assert queue.of("nvidia.com/gpu").limit == 8
    assert dict(queue.limits) == {"nvidia.com/gpu": 8}
    assert queue.quota.milli_cpu == 2000
    with pytest.raises(ValueError, match="unknown resource"):
        queue.of("ephemeral-storage")
