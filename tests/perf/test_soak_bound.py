"""``hack/soak_bound.py``: the ideal scheduler the soak's share is compared with keeps its books."""

from __future__ import annotations

import soak_bound
from soak_bound import Cluster, Group


def test_gpus_are_neither_lost_nor_made_by_starts_early_deletions_and_latency() -> None:
    cluster = Cluster([8, 8], latency=0.5)
    waiting = [Group(0.0, (4,), 10.0), Group(0.0, (1,) * 10, 3.0), Group(0.0, (8,), 1.0)]
    soak_bound._schedule(cluster, waiting, 0.0, 1.0)
    assert [g.sizes for g in waiting] == [(8,)], "the 8-GPU pod waits: 14 of 16 GPUs are taken"
    assert cluster.held(0.5) == 14 and sum(cluster.free) == 2
    cluster.delete_early(1, 2.0)  # the 4-GPU pod, deleted at 2 s: back at 2.5 s
    cluster.give_back(2.4)
    assert sum(cluster.free) == 2, "not back before the latency"
    cluster.give_back(100.0)
    assert sum(cluster.free) == 16 and not cluster.pods


def test_a_gang_waits_until_its_whole_size_is_free_and_a_small_pod_backfills() -> None:
    cluster = Cluster([8], latency=0.0)
    cluster.start(0, 6, ends=5.0)
    waiting = [Group(0.0, (1,) * 4, 1.0), Group(0.0, (2,), 1.0)]
    soak_bound._schedule(cluster, waiting, 0.0, 1.0)
    assert [g.sizes for g in waiting] == [(1, 1, 1, 1)], "the 2-GPU pod went past the waiting gang"


def test_latency_keeps_gpus_idle_the_latency_after_each_pod_ends() -> None:
    share_now, _ = soak_bound.run(3, 1000, 16, seed=1, latency=0.0)
    share_late, _ = soak_bound.run(3, 1000, 16, seed=1, latency=5.0)
    assert share_late < share_now
