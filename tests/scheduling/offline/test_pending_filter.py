"""The filter decision asked offline for waiting pods: kube-scheduler's candidates, then phalanx's answer."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Node, Pod
from scheduling.offline.pending_filter import (
    KUBE_SCHEDULER,
    PHALANX,
    PodReplay,
    in_tree_filter,
    replay_pending,
    waiting_pods,
)
from scheduling.session import SessionSettings
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue
from tests.scheduling.topology.shared_files import document

CACHE = TopologyCache()
SETTINGS = SessionSettings()


def bridged(name: str) -> Node:
    return replace(a_node(name).build(), topology=CACHE.topology(document("a6000-8")))


def cluster(*extra: Pod) -> ClusterSnapshot:
    """Three 8-GPU nodes: a 2x4 gang fills n1, a 3-GPU pod sits on n2, a 2x8 gang waits (as in tests/e2e)."""
    pods = [
        *(
            a_pod(f"run-{i}").gpus(4).group("run").queue("a").on("n1", range(4 * i, 4 * i + 4)).build()
            for i in range(2)
        ),
        a_pod("solo").gpus(3).queue("b").on("n2", [0, 1, 2]).build(),
        *(a_pod(f"big-{i}").gpus(8).group("big").queue("b").build() for i in range(2)),
        *extra,
    ]
    queues = [gpu_queue("a", 8, 1, 12), gpu_queue("b", 8), gpu_queue("c", 0, 2)]
    return snapshot_of(
        [bridged(f"n{i}") for i in (1, 2, 3)], pods, [a_gang("run", 2), a_gang("big", 2)], queues
    )


def replay(snapshot: ClusterSnapshot, *pods: str, every_node: bool = False) -> tuple[PodReplay, ...]:
    return replay_pending(
        snapshot, now=1000.0, settings=SETTINGS, topologies=CACHE, pods=pods or None, every_node=every_node
    )


def test_a_waiting_gang_gets_the_sentence_kube_scheduler_would_show() -> None:
    [big0, big1] = replay(cluster())
    assert (big0.pod, big0.group, big1.pod) == ("ml/big-0", "ml/big", "ml/big-1")
    message = "gang ml/big: needs 16 GPUs for 2 pods (8 per pod); 8 free on 1 node, at most 8 on one node"
    assert big0.asked_phalanx and big0.feasible == ()
    assert big0.verdict == message
    assert [(r.source, r.message, r.nodes) for r in big0.reasons] == [
        (KUBE_SCHEDULER, "Insufficient nvidia.com/gpu", ("n1", "n2")),
        (PHALANX, message, ("n3",)),
    ]
    assert big1.verdict == message, "each pod is asked on its own: no reservation carries over"
    assert big0.summary == f"0/3 nodes are available: 1 {message}, 2 Insufficient nvidia.com/gpu."


def test_offering_every_node_counts_the_free_gpus_of_all_of_them() -> None:
    [big0] = replay(cluster(), "ml/big-0", every_node=True)
    assert (
        big0.verdict
        == "gang ml/big: needs 16 GPUs for 2 pods (8 per pod); 13 free on 2 nodes, at most 8 on one node"
    )
    assert {r.source for r in big0.reasons} == {PHALANX}
    assert big0.reasons[0].nodes == ("n1", "n2", "n3")


def test_a_pod_that_fits_passes_on_every_node_with_room() -> None:
    [fits] = replay(cluster(a_pod("four").gpus(4).queue("c").build()), "ml/four")
    assert fits.feasible == ("n2", "n3")
    assert [(r.source, r.nodes) for r in fits.reasons] == [(KUBE_SCHEDULER, ("n1",))]
    assert fits.verdict is None and fits.summary is None


def test_when_kube_schedulers_filters_pass_no_node_phalanx_is_not_asked() -> None:
    snapshot = cluster(
        a_pod("five").gpus(5).queue("c").on("n3", range(5)).build(), a_pod("six").gpus(6).queue("c").build()
    )
    [six] = replay(snapshot, "ml/six")
    assert not six.asked_phalanx and six.verdict is None and six.feasible == ()
    assert [(r.source, r.nodes) for r in six.reasons] == [(KUBE_SCHEDULER, ("n1", "n2", "n3"))]
    assert six.summary == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def test_a_queue_over_its_limit_holds_the_pod_with_the_queues_sentence() -> None:
    [held] = replay(cluster(a_pod("more").gpus(8).queue("a").build()), "ml/more")
    assert held.feasible == ()
    assert held.verdict is not None and "queue a" in held.verdict and "limit" in held.verdict
    assert [(r.source, r.message) for r in held.reasons if r.source == PHALANX] == [(PHALANX, held.verdict)]


def test_finished_pods_are_left_out_as_the_extenders_cache_leaves_them() -> None:
    done = a_pod("big-2").gpus(8).group("big").on("n3", range(8)).phase("Succeeded").build()
    snapshot = cluster(done)
    three = replace(snapshot, groups={**snapshot.groups, "ml/big": a_gang("big", 3)})
    [big0, _] = replay(three)
    # The finished member is no member: the gang is planned for 3 with one not created yet (counted,
    # the finished pod would have left 2 pods to plan, "needs 16 GPUs for 2 pods").
    assert big0.verdict == (
        "gang ml/big: needs 24 GPUs for 3 pods (8 per pod); 8 free on 1 node, at most 8 on one node"
    )


def test_in_tree_filter_respects_cordons_and_the_pools_pin_taint() -> None:
    pool = replace(a_node("pool").build(), pin_taint=True)
    snapshot = snapshot_of([pool, a_node("open").build(), a_node("closed").cordoned().build()])
    plain = a_pod("p").gpus(1).build()
    assert in_tree_filter(plain, snapshot) == (
        ("open",),
        {
            "closed": ("node(s) were unschedulable",),
            "pool": ("node(s) had untolerated taint {phalanx.io/hostname: pool}",),
        },
    )
    pinned = replace(plain, pinned=frozenset({"pool"}))
    tolerant = replace(plain, tolerates_pool=True)
    assert in_tree_filter(pinned, snapshot)[0] == ("open", "pool")
    assert in_tree_filter(tolerant, snapshot)[0] == ("open", "pool")


def test_in_tree_filter_names_every_insufficient_resource() -> None:
    node = a_node("n").cpu(4000).memory(8 * 2**30).build()
    held = a_pod("h").cpu(3000).memory(4 * 2**30).gpus(6).on("n").build()
    big = a_pod("big").cpu(2000).memory(5 * 2**30).gpus(4).build()
    assert in_tree_filter(big, snapshot_of([node], [held]))[1] == {
        "n": ("Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu")
    }
    cpu_only = a_pod("c").cpu(1000).build()
    assert in_tree_filter(cpu_only, snapshot_of([node], [held]))[0] == ("n",)


@pytest.mark.parametrize(
    ("pod", "error"),
    [
        ("ml/ghost", "pod ml/ghost is not in the snapshot"),
        ("ml/solo", "pod ml/solo is already bound to node n2"),
        ("ml/theirs", "pod ml/theirs is scheduled by default-scheduler, not phalanx"),
        ("nobody", "pod nobody is not in the snapshot"),
    ],
)
def test_a_pod_that_is_not_waiting_for_phalanx_is_refused(pod: str, error: str) -> None:
    theirs = replace(a_pod("theirs").gpus(1).build(), scheduler_name="default-scheduler")
    with pytest.raises(ValueError, match=error):
        replay(cluster(theirs), pod)


def test_waiting_pods_are_phalanxs_unbound_pending_ones_by_key() -> None:
    theirs = replace(a_pod("theirs").gpus(1).build(), scheduler_name="default-scheduler")
    going = a_pod("going").gpus(1).terminating().build()
    assert [p.key for p in waiting_pods(cluster(theirs, going))] == ["ml/big-0", "ml/big-1"]
