from __future__ import annotations

from dataclasses import dataclass

import pytest

from scheduling.queues.queue_tree import DEFAULT_QUEUE, Queue, QueueError, QueueTree, ResourceQuota
from scheduling.queues.validation import MAX_QUEUE_DEPTH
from tests.scheduling.queues.builders import gpu_queue


@dataclass(frozen=True)
class Invalid:
    name: str
    queues: tuple[Queue, ...]
    rejected: dict[str, str]
    in_force: tuple[str, ...] = (DEFAULT_QUEUE,)


INVALID = [
    Invalid(
        "negative quota",
        (gpu_queue("team-a", -1),),
        {"team-a": "queue team-a: nvidia.com/gpu quota is -1; it must be 0 or more"},
    ),
    Invalid(
        "negative weight",
        (gpu_queue("team-a", 4, weight=-2),),
        {"team-a": "queue team-a: nvidia.com/gpu overQuotaWeight is -2; it must be 0 or more"},
    ),
    Invalid(
        "limit below quota",
        (gpu_queue("team-a", 8, limit=4),),
        {"team-a": "queue team-a: nvidia.com/gpu limit 4 is below its quota 8"},
    ),
    Invalid(
        "negative limit",
        (Queue("team-a", cpu=ResourceQuota(0, 1, -1000)),),
        {"team-a": "queue team-a: cpu limit is -1; it must be 0 or more"},
    ),
    Invalid(
        "memory limit below quota, in Gi",
        (Queue("team-a", memory=ResourceQuota(16 * 2**30, 1, 8 * 2**30)),),
        {"team-a": "queue team-a: memory limit 8Gi is below its quota 16Gi"},
    ),
    Invalid(
        "negative minimum runtime",
        (gpu_queue("team-a", min_runtime=-5),),
        {"team-a": "queue team-a: minRuntimeSeconds is -5; it must be 0 or more"},
    ),
    Invalid(
        "a value the adapter could not read",
        (Queue("team-a", problem="spec.resources.nvidia.com/gpu.quota: 'lots' is not a quantity"),),
        {"team-a": "queue team-a: spec.resources.nvidia.com/gpu.quota: 'lots' is not a quantity"},
    ),
    Invalid(
        "unknown parent, and the subtree below it",
        (gpu_queue("team-a", parent="org"), gpu_queue("vision", parent="team-a"), gpu_queue("ok", 4)),
        {
            "team-a": "queue team-a: parent org does not exist",
            "vision": "queue vision: its parent team-a is set aside "
            "(queue team-a: parent org does not exist)",
        },
        (DEFAULT_QUEUE, "ok"),
    ),
    Invalid(
        "parent is itself",
        (gpu_queue("team-a", parent="team-a"),),
        {"team-a": "queue team-a: parent names the queue itself"},
    ),
    Invalid(
        "three-queue cycle",
        (gpu_queue("b", parent="c"), gpu_queue("c", parent="a"), gpu_queue("a", parent="b")),
        {q: f"queue {q}: queues a, b, c form a parent cycle (a -> b -> c -> a)" for q in "abc"},
    ),
    Invalid(
        "cycle hanging off a valid root: the root stays, the cycle and what hangs off it go",
        (
            gpu_queue("root"),
            gpu_queue("x", parent="y"),
            gpu_queue("y", parent="x"),
            gpu_queue("z", parent="x"),
        ),
        {
            "x": "queue x: queues x, y form a parent cycle (x -> y -> x)",
            "y": "queue y: queues x, y form a parent cycle (x -> y -> x)",
            "z": "queue z: its parent x is set aside "
            "(queue x: queues x, y form a parent cycle (x -> y -> x))",
        },
        (DEFAULT_QUEUE, "root"),
    ),
    Invalid(
        "children's quotas over the parent's: the child created last that does not fit goes",
        (
            gpu_queue("org", 10),
            gpu_queue("team-a", 8, parent="org", created="2026-01-01T00:00:00Z"),
            gpu_queue("team-b", 4, parent="org", created="2026-01-02T00:00:00Z"),
            gpu_queue("team-c", 2, parent="org", created="2026-01-03T00:00:00Z"),
        ),
        {
            "team-b": "queue team-b: its nvidia.com/gpu quota 4 does not fit in its parent org's quota 10 "
            "beside its older siblings (team-a 8)",
        },
        (DEFAULT_QUEUE, "org", "team-a", "team-c"),
    ),
    Invalid(
        "the default queue gets children",
        (gpu_queue("team-a", parent=DEFAULT_QUEUE),),
        {
            "team-a": "queue team-a: its parent is the default queue, which takes the workloads that name "
            "no queue and so cannot have child queues",
        },
    ),
    Invalid(
        "a default queue set aside: the implicit one stands in",
        (gpu_queue(DEFAULT_QUEUE, -1),),
        {
            DEFAULT_QUEUE: "queue default: nvidia.com/gpu quota is -1; it must be 0 or more; "
            "the implicit default queue (no quota, weight 1) stands in",
        },
    ),
    Invalid(
        "duplicate name",
        (gpu_queue("team-a", 1), gpu_queue("team-a", 2)),
        {"team-a": "queue team-a: defined more than once"},
    ),
    Invalid(
        "every problem is listed, sorted by queue",
        (gpu_queue("b", -1), gpu_queue("a", 2, limit=1), gpu_queue("c", parent="nowhere")),
        {
            "a": "queue a: nvidia.com/gpu limit 1 is below its quota 2",
            "b": "queue b: nvidia.com/gpu quota is -1; it must be 0 or more",
            "c": "queue c: parent nowhere does not exist",
        },
    ),
]


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_an_invalid_queue_is_set_aside_with_its_subtree_and_the_rest_stays(case: Invalid) -> None:
    tree = QueueTree.build(case.queues)
    assert dict(tree.rejected) == case.rejected
    assert list(tree.rejected) == sorted(case.rejected), "sorted by queue name"
    assert tree.problems == tuple(case.rejected[name] for name in sorted(case.rejected))
    assert tuple(tree.queues) == case.in_force
    for name in case.rejected:
        if name != DEFAULT_QUEUE:
            with pytest.raises(QueueError) as raised:
                tree.workload_queue(name)
            assert str(raised.value) == f"{case.rejected[name]}; the queue is set aside until that is fixed"


def test_a_chain_deeper_than_the_limit_is_cut_below_the_limit_without_recursion() -> None:
    chain = [gpu_queue("q0")] + [gpu_queue(f"q{i}", parent=f"q{i - 1}") for i in range(1, 1100)]
    tree = QueueTree.build(chain)
    assert tree.path(f"q{MAX_QUEUE_DEPTH - 1}") == tuple(f"q{i}" for i in range(MAX_QUEUE_DEPTH))
    first = f"q{MAX_QUEUE_DEPTH}"
    assert tree.rejected[first] == (
        f"queue {first}: it is {MAX_QUEUE_DEPTH + 1} levels deep; phalanx allows {MAX_QUEUE_DEPTH}"
    )
    why = tree.rejected[first]
    assert tree.rejected["q1099"] == f"queue q1099: its ancestor {first} is set aside ({why})"
    assert len(tree.rejected) == 1100 - MAX_QUEUE_DEPTH


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
