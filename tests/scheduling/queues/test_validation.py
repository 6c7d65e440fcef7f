"""One bad Queue stays with that queue: every other queue's shares are as if it were not there.

The property is checked on random valid trees (quotas that fit their parents, random demand, pods that
hold GPUs) plus one hostile queue of every kind the rules set aside: a parent that does not exist, a
parent that is itself, a child of the default queue, negative or unreadable values, a limit below the
quota, a child created last whose quota does not fit its parent's, a queue below the depth limit. The
hostile queue has pods of its own, waiting and running, as a real team's queue would.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import PromiseBook
from scheduling.model import Pod
from scheduling.queues import DEFAULT_QUEUE, Queue, QueueTree, ResourceQuota
from scheduling.queues.validation import MAX_QUEUE_DEPTH
from scheduling.queues.view import QueueView, build_queue_view
from tests.builders import a_node, a_pod

NODES = [a_node(f"n{i}").build() for i in range(4)]  # 32 GPUs


@st.composite
def valid_trees(draw: st.DrawFn) -> list[Queue]:
    """Up to 7 queues whose children's quotas fit their parents' (so the set is valid as it is)."""
    count = draw(st.integers(1, 7))
    queues: list[Queue] = []
    left: dict[str, int] = {}
    for i in range(count):
        parent = draw(st.one_of(st.none(), st.integers(0, i - 1))) if i else None
        parent_name = None if parent is None else f"q{parent}"
        room = 16 if parent_name is None else left[parent_name]
        quota = draw(st.integers(0, room))
        if parent_name is not None:
            left[parent_name] -= quota
        left[f"q{i}"] = quota
        limit = draw(st.one_of(st.none(), st.integers(quota, quota + 8)))
        weight = draw(st.integers(0, 3))
        created = f"2026-01-01T00:00:{i:02d}Z"
        queues.append(Queue(f"q{i}", parent_name, gpu=ResourceQuota(quota, weight, limit), created=created))
    return queues


LAST = "2026-06-01T00:00:00Z"
"""The hostile queue is created after every other one (the one that came last is the one at fault)."""


@st.composite
def hostile_queues(draw: st.DrawFn, names: list[str]) -> Queue:
    kind = draw(
        st.sampled_from(
            [
                "unknown parent",
                "itself",
                "under default",
                "negative",
                "unreadable",
                "limit below quota",
                "does not fit",
            ]
        )
    )
    parent = draw(st.one_of(st.none(), st.sampled_from(names)))
    if kind == "unknown parent":
        return Queue("bad", "gone", gpu=ResourceQuota(draw(st.integers(0, 64)), 1), created=LAST)
    if kind == "itself":
        return Queue("bad", "bad", gpu=ResourceQuota(4, 1), created=LAST)
    if kind == "under default":
        return Queue("bad", DEFAULT_QUEUE, created=LAST)
    if kind == "negative":
        return Queue("bad", parent, gpu=ResourceQuota(-draw(st.integers(1, 9)), 1), created=LAST)
    if kind == "unreadable":
        return Queue("bad", parent, created=LAST, problem="spec.resources.nvidia.com/gpu.quota: 'lots'")
    if kind == "limit below quota":
        return Queue("bad", parent, gpu=ResourceQuota(8, 1, 2), created=LAST)
    return Queue("bad", draw(st.sampled_from(names)), gpu=ResourceQuota(17, 1), created=LAST)


def pods_for(names: list[str], gpus: list[int]) -> list[Pod]:
    """One waiting and one running pod per queue (the hostile one's too); GPUs from ``gpus``."""
    pods = []
    for i, name in enumerate(names):
        label = {"phalanx.io/queue": name}
        waiting = a_pod(f"w-{name}").gpus(gpus[i % len(gpus)]).created(f"2026-02-01T00:00:{i:02d}Z").build()
        node = f"n{i % len(NODES)}"
        running = a_pod(f"r-{name}").gpus(1).on(node, [4 + i // len(NODES)]).build()
        pods += [replace(waiting, labels=label), replace(running, labels=label)]
    return pods


def assert_unchanged(with_bad: QueueView, without: QueueView) -> None:
    assert "bad" not in with_bad.tree.queues
    assert "bad" in with_bad.tree.rejected
    assert dict(with_bad.tree.queues) == dict(without.tree.queues)
    for name in without.tree.queues:
        assert with_bad.shares[name] == without.shares[name], name
        assert with_bad.states[name] == without.states[name], name
    assert with_bad.pending == without.pending
    assert with_bad.capacity == without.capacity
    assert with_bad.misplaced.keys() - without.misplaced.keys() == set()


@settings(max_examples=300, deadline=None)
@given(data=st.data(), tree=valid_trees(), gpus=st.lists(st.integers(0, 8), min_size=1, max_size=5))
def test_any_single_bad_queue_leaves_every_other_queues_fair_share_unchanged(
    data: st.DataObject, tree: list[Queue], gpus: list[int]
) -> None:
    names = [q.name for q in tree]
    bad = data.draw(hostile_queues(names))
    # Workloads name leaves only; a parent that workloads name is misplaced either way.
    pods = pods_for([*names, DEFAULT_QUEUE, "bad"], gpus)
    without = build_queue_view(tree, NODES, pods, PromiseBook())
    assert without.problems == (), "the random tree is valid on its own"
    with_bad = build_queue_view([*tree, bad], NODES, pods, PromiseBook())
    assert_unchanged(with_bad, without)
    assert set(with_bad.tree.rejected) == {"bad"}


def test_a_queue_below_the_depth_limit_is_set_aside_and_the_chain_above_it_is_unchanged() -> None:
    chain = [Queue("q0", gpu=ResourceQuota(8, 1))]
    chain += [Queue(f"q{i}", f"q{i - 1}", gpu=ResourceQuota(8, 1)) for i in range(1, MAX_QUEUE_DEPTH)]
    bad = Queue("bad", f"q{MAX_QUEUE_DEPTH - 1}", created=LAST)
    pods = pods_for([f"q{MAX_QUEUE_DEPTH - 1}", DEFAULT_QUEUE, "bad"], [2])
    without = build_queue_view(chain, NODES, pods, PromiseBook())
    with_bad = build_queue_view([*chain, bad], NODES, pods, PromiseBook())
    assert_unchanged(with_bad, without)
    assert with_bad.tree.rejected["bad"] == (
        f"queue bad: it is {MAX_QUEUE_DEPTH + 1} levels deep; phalanx allows {MAX_QUEUE_DEPTH}"
    )


def test_a_parent_set_aside_takes_its_subtree_and_nothing_else() -> None:
    teams = [
        Queue("org", "typo", gpu=ResourceQuota(8, 1)),
        Queue("vision", "org", gpu=ResourceQuota(4, 1)),
        Queue("nlp", "org", gpu=ResourceQuota(4, 1)),
        Queue("prod", gpu=ResourceQuota(8, 1)),
    ]
    tree = QueueTree.build(teams)
    assert sorted(tree.rejected) == ["nlp", "org", "vision"]
    why = "queue org: parent typo does not exist"
    assert tree.rejected["nlp"] == f"queue nlp: its parent org is set aside ({why})"
    alone = QueueTree.build([teams[-1]])
    assert dict(tree.queues) == dict(alone.queues)
