"""The queue rows: tree order, the figures of the queue view, and the two marks an operator looks for."""

from __future__ import annotations

from scheduling.cluster.promises import PromiseBook
from scheduling.model import Pod
from scheduling.queues import Queue, QueueTree, ResourceQuota
from scheduling.queues.queue_table import queue_rows, shown_resources
from scheduling.queues.view import QueueView, pending_of, view_of
from scheduling.resources import CPU, GPU
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of
from tests.scheduling.queues.builders import gpu_queue


def view(pods: list[Pod], queues: list[Queue], nodes: int = 3) -> QueueView:
    cluster = snapshot_of([a_node(f"n{i}").build() for i in range(nodes)], pods, [], queues)
    return view_of(cluster, PromiseBook())


def test_rows_follow_the_tree_parents_first_siblings_by_name() -> None:
    queues = [
        gpu_queue("research", 16),
        gpu_queue("vision", 8, parent="research"),
        gpu_queue("nlp", 8, parent="research"),
        gpu_queue("ops", 0),
    ]
    rows = queue_rows(view([], queues))
    assert [(r.name, r.depth, r.parent, r.leaf) for r in rows] == [
        ("default", 0, None, True),
        ("ops", 0, None, True),
        ("research", 0, None, False),
        ("nlp", 1, "research", True),
        ("vision", 1, "research", True),
    ]


def test_figures_are_the_queue_views() -> None:
    queues = [gpu_queue("a", 8, 1, 12), gpu_queue("b", 8), gpu_queue("c", 0, 2)]
    running = [a_pod(f"a{i}").gpus(4).queue("a").on(f"n{i}", range(4)).build() for i in range(2)]
    running.append(a_pod("c0").gpus(2).queue("c").on("n2", [4, 5]).build())
    waiting = [a_pod(f"b{i}").gpus(8).queue("b").group("big").build() for i in range(2)]
    queue_view = view(running + waiting, queues)
    rows = {r.name: r for r in queue_rows(queue_view)}
    a = rows["a"].resources[0]
    assert (a.resource, a.quota, a.weight, a.limit, a.allocated, a.pending) == (GPU, 8, 1, 12, 8, 0)
    for name, row in rows.items():
        [gpu] = row.resources
        share = queue_view.shares[name]
        assert gpu.allocated == queue_view.states[name].allocated.gpus
        assert (gpu.deserved, gpu.fair_share) == (share.deserved.gpus, share.fair_share.gpus)
        assert gpu.pending == pending_of(queue_view, name).gpus
    assert rows["b"].resources[0].pending == 16
    assert rows["b"].starved, "b holds nothing of its quota of 8 while 16 GPUs of its work wait"
    assert not rows["a"].starved and not rows["c"].starved


def test_over_fair_share_is_marked() -> None:
    # 24 GPUs; c (quota 0, weight 2) holds 16; b waits for 16 with quota 8: c's fair share is below 16.
    queues = [gpu_queue("b", 8), gpu_queue("c", 0, 2)]
    running = [a_pod(f"c{i}").gpus(8).queue("c").on(f"n{i}", range(8)).build() for i in range(2)]
    waiting = [a_pod(f"b{i}").gpus(8).queue("b").build() for i in range(2)]
    rows = {r.name: r for r in queue_rows(view(running + waiting, queues))}
    assert rows["c"].over_fair_share
    assert rows["c"].resources[0].allocated > rows["c"].resources[0].fair_share
    assert not rows["b"].over_fair_share and rows["b"].starved


def test_a_parent_sums_its_subtree() -> None:
    queues = [gpu_queue("org", 16), gpu_queue("t1", 8, parent="org"), gpu_queue("t2", 8, parent="org")]
    pods = [
        a_pod("x").gpus(4).queue("t1").on("n0", range(4)).build(),
        a_pod("y").gpus(2).queue("t2").on("n1", range(2)).build(),
        a_pod("z").gpus(8).queue("t2").build(),
    ]
    rows = {r.name: r for r in queue_rows(view(pods, queues))}
    assert (rows["org"].resources[0].allocated, rows["org"].resources[0].pending) == (6, 8)
    assert rows["org"].starved, "the parent is below its quota while work below it waits"


def test_cpu_and_memory_are_shown_only_when_some_queue_sets_them() -> None:
    assert shown_resources(QueueTree.build([gpu_queue("a", 8)])) == (GPU,)
    with_cpu = Queue("a", gpu=ResourceQuota(8), cpu=ResourceQuota(quota=0, over_quota_weight=3))
    assert shown_resources(QueueTree.build([with_cpu])) == (GPU, CPU)
    pods = [a_pod("x").cpu(2000).queue("a").on("n0").build()]
    [a] = [r for r in queue_rows(view(pods, [with_cpu])) if r.name == "a"]
    assert [(f.resource, f.weight, f.allocated) for f in a.resources] == [(GPU, 1, 0), (CPU, 3, 2000)]


def test_a_gang_waiting_counts_in_pending_once_per_member() -> None:
    pods = members("g", 3, 2)
    labelled = [a_pod(p.name).gpus(2).group("g").queue("a").build() for p in pods]
    cluster = snapshot_of([a_node("n0").build()], labelled, [a_gang("g", 3)], [gpu_queue("a", 4)])
    [a] = [r for r in queue_rows(view_of(cluster, PromiseBook())) if r.name == "a"]
    assert a.resources[0].pending == 6
