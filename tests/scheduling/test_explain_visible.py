"""An explanation as a namespace member sees it: the admin's, other namespaces' groups not named."""

from __future__ import annotations

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain import Cause, Target, explain
from scheduling.explain.visible import OTHER, for_namespace, foreign_keys
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

NODES = [a_node(f"n{i}").build() for i in (1, 2, 3)]
P = Target("pod", "ml", "p")


def crowded(mid_namespace: str) -> ClusterSnapshot:
    """Two full nodes and one with 2 GPUs free; ``mid`` (6 GPUs on n3) is in ``mid_namespace``."""
    return snapshot_of(
        NODES,
        [
            a_pod("big1", "other").gpus(8).on("n1", range(8)).build(),
            a_pod("big2", "other").gpus(8).on("n2", range(8)).build(),
            a_pod("mid", mid_namespace).gpus(6).on("n3", range(6)).build(),
            a_pod("p").gpus(4).build(),
        ],
    )


def test_a_group_of_another_namespace_is_replaced_everywhere_it_is_named() -> None:
    said = explain(crowded("other"), P, now=1.0)
    assert said.what_if is not None and said.what_if.finished == ("other/mid",)
    assert "other/mid" in said.verdict

    hidden = for_namespace(said, "ml")

    assert hidden.cause is said.cause is Cause.NO_CAPACITY
    assert hidden.what_if is not None
    assert hidden.what_if.finished == (OTHER,)
    assert hidden.what_if.plan == said.what_if.plan  # its own pod's plan is the member's to see
    assert hidden.verdict == said.verdict.replace("other/mid", OTHER)
    assert "other" not in repr(hidden).replace(OTHER, "")
    assert hidden.nodes == said.nodes


def test_its_own_namespace_is_left_as_the_admin_sees_it() -> None:
    said = explain(crowded("ml"), P, now=1.0)
    assert foreign_keys(said, "ml") == frozenset()
    assert for_namespace(said, "ml") is said


def test_groups_ahead_in_the_queue_are_counted_but_not_named() -> None:
    snapshot = snapshot_of(
        NODES,
        [
            a_pod("a1").gpus(8).queue("a").on("n1", range(8)).build(),
            a_pod("first", "rival").gpus(8).queue("a").created("2030-01-01T00:00:00Z").build(),
            a_pod("p").gpus(8).queue("a").created("2030-01-01T00:01:00Z").build(),
        ],
        queues=[gpu_queue("a", quota=8, limit=12)],
    )
    said = explain(snapshot, P, now=1.0)
    assert said.queue is not None
    assert said.queue.ahead == ("rival/first",)
    hidden = for_namespace(said, "ml")
    assert hidden.queue is not None
    assert len(hidden.queue.ahead) == len(said.queue.ahead)
    assert hidden.queue.position == said.queue.position
    assert hidden.queue.ahead == (OTHER,)
    assert all(not name.startswith("rival/") for name in hidden.queue.holders)
    assert "rival/" not in hidden.queue.sentence + hidden.verdict
