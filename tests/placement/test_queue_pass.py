from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from kubeio.errors import NotFoundError
from placement.queue_pass import SHRINK_WAIT, QueuePass, QueueReport
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Pod
from scheduling.queues import Queue
from scheduling.topology import TopologyCache
from tests.builders import FakeEvents, a_node, a_round, snapshot_of
from tests.scheduling.queues.builders import gang_pods, gpu_queue

NODES = [a_node("n1").build(), a_node("n2").build()]  # 16 GPUs


@dataclass
class QueueCluster:
    """QueueSource, QueueSink and PodDeleter in memory; a deleted pod terminates until ``finish``."""

    queue_list: list[Queue]
    pods_by_key: dict[str, Pod] = field(default_factory=dict)
    statuses: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    version: int = 0

    def add(self, *pods: Pod) -> QueueCluster:
        self.pods_by_key.update((p.key, p) for p in pods)
        return self

    def snapshot(self) -> ClusterSnapshot:
        """A new version every time: tests change the lists in place, so any snapshot may differ."""
        self.version += 1
        return replace(
            snapshot_of(NODES, self.pods_by_key.values(), queues=self.queue_list), version=self.version
        )

    def pods(self) -> list[Pod]:
        return list(self.pods_by_key.values())

    def queues(self) -> list[Queue]:
        return list(self.queue_list)

    def set_status(self, name: str, status: Mapping[str, Any]) -> None:
        if name not in {q.name for q in self.queue_list}:
            raise NotFoundError(404, "NotFound", f'queues.phalanx.io "{name}" not found')
        self.statuses.append((name, dict(status)))

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        key = f"{namespace}/{name}"
        self.deleted.append(key)
        self.pods_by_key[key] = replace(self.pods_by_key[key], terminating=True)
        return True

    def finish(self) -> None:
        """Every terminating pod is gone."""
        self.pods_by_key = {k: p for k, p in self.pods_by_key.items() if not p.terminating}


@dataclass
class Driven:
    """A queue pass fed a round of ``cluster`` each run, told which groups shrink instead."""

    queue_pass: QueuePass
    cluster: QueueCluster
    shrinking: frozenset[str]

    def run(self) -> QueueReport:
        return self.queue_pass.run(a_round(self.cluster, now=1000.0), shrinking=self.shrinking)


def reconciler_for(
    cluster: QueueCluster, events: FakeEvents | None = None, shrinking: frozenset[str] = frozenset()
) -> Driven:
    sink = events or FakeEvents()
    return Driven(QueuePass(cluster, cluster, sink, topologies=TopologyCache()), cluster, shrinking)


def test_each_queue_status_is_written_once_and_again_only_when_it_changes() -> None:
    cluster = QueueCluster([gpu_queue("a", quota=8), gpu_queue("b", quota=8)]).add(
        *gang_pods("a1", "a", "n1")
    )
    reconciler = reconciler_for(cluster)
    assert reconciler.run().statuses == ("a", "b")
    assert reconciler.run().statuses == ()
    cluster.add(*gang_pods("b1", "b", None))
    assert "b" in reconciler.run().statuses
    last: dict[str, dict[str, Any]] = {}
    for name, status in cluster.statuses:
        assert last.get(name) != status, f"queue {name}: the same status written twice"
        last[name] = status
    assert (last["a"]["gpu"]["allocated"], last["b"]["gpu"]["pending"]) == (8, 8)


TREE = [
    gpu_queue("org", quota=16),
    gpu_queue("org-x", quota=8, parent="org"),
    gpu_queue("org-y", quota=8, parent="org"),
    gpu_queue("other", quota=0),
]


@pytest.mark.parametrize(
    ("queue", "pending"),
    [("org", 6), ("org-x", 2), ("org-y", 4), ("other", 0)],
)
def test_a_queue_status_counts_pending_work_of_its_whole_subtree(queue: str, pending: int) -> None:
    cluster = QueueCluster(TREE).add(
        *gang_pods("x1", "org-x", None, size=1, gpus=2), *gang_pods("y1", "org-y", None, size=2, gpus=2)
    )
    reconciler_for(cluster).run()
    assert dict(cluster.statuses)[queue]["gpu"]["pending"] == pending


def test_a_bad_queue_and_its_subtree_say_why_and_every_other_queue_stays_valid_with_its_figures() -> None:
    good = QueueCluster(list(TREE)).add(*gang_pods("x1", "org-x", "n1"))
    reconciler_for(good).run()
    bad = gpu_queue("org-z", quota=4, parent="org", created="2026-06-01T00:00:00Z")  # 8 + 8 + 4 > 16
    cluster = QueueCluster([*TREE, bad, gpu_queue("org-z-1", parent="org-z")]).add(
        *gang_pods("x1", "org-x", "n1")
    )
    reconciler_for(cluster).run()
    statuses = dict(cluster.statuses)
    for name in ("org-z", "org-z-1"):
        [valid] = statuses[name]["conditions"]
        assert (valid["status"], valid["reason"]) == ("False", "SetAside")
        assert statuses[name]["gpu"] is None, "a queue set aside is in no share: its old figures go"
    assert (
        "does not fit in its parent org's quota 16 beside its older siblings"
        in (statuses["org-z"]["conditions"][0]["message"])
    )
    assert "its parent org-z is set aside" in statuses["org-z-1"]["conditions"][0]["message"]
    assert {name: statuses[name] for name in dict(good.statuses)} == dict(good.statuses)
    assert all(s["conditions"][0]["status"] == "True" for n, s in good.statuses)


def test_reclaim_evicts_whole_gangs_and_waits_while_they_terminate() -> None:
    cluster = QueueCluster([gpu_queue("a", quota=8), gpu_queue("b", quota=8)]).add(
        *gang_pods("b1", "b", "n1"), *gang_pods("b2", "b", "n2"), *gang_pods("a1", "a", None)
    )
    events = FakeEvents()
    reconciler = reconciler_for(cluster, events)
    first = reconciler.run()
    assert len(first.evicted) == 1
    victim = first.evicted[0]
    members = sorted(p.key for p in cluster.pods() if p.group_key == victim)
    assert victim in ("ml/b1", "ml/b2") and len(members) == 2
    assert sorted(cluster.deleted) == members
    assert [(kind, f"ml/{name}", reason) for kind, name, _, reason, _ in events.events] == [
        ("Pod", key, "Reclaimed") for key in members
    ]
    assert all(message.startswith(f"evicted whole with {victim}: ") for *_, message in events.events)

    assert reconciler.run().evicted == (), "victims still terminating: no second eviction"
    assert sorted(cluster.deleted) == members

    cluster.finish()
    assert reconciler.run().evicted == (), "the room freed fits the waiting gang"


def test_reclaim_leaves_elastic_jobs_above_their_minimum_to_shrink() -> None:
    """Their surplus goes back by shrinking first; evicting one whole would lose more than needed."""

    def starved() -> QueueCluster:
        return QueueCluster([gpu_queue("a", quota=8), gpu_queue("b", quota=8)]).add(
            *gang_pods("b1", "b", "n1"), *gang_pods("b2", "b", "n2"), *gang_pods("a1", "a", None)
        )

    assert reconciler_for(starved(), shrinking=frozenset({"ml/b1", "ml/b2"})).run().evicted == ()
    only = reconciler_for(starved(), shrinking=frozenset({"ml/b1"})).run().evicted
    assert only == ("ml/b2",), "a job at its minimum is a gang like any other"


def test_reclaim_waits_for_a_shrinking_elastic_job_but_not_for_ever() -> None:
    """A worker terminating on a dead node never goes: one such job must not stop reclaim for everyone."""
    cluster = QueueCluster([gpu_queue("a", quota=8), gpu_queue("b", quota=8)]).add(
        *gang_pods("b1", "b", "n1"), *gang_pods("b2", "b", "n2"), *gang_pods("a1", "a", None)
    )
    queue_pass = QueuePass(cluster, cluster, FakeEvents(), topologies=TopologyCache())

    def run(now: float) -> QueueReport:
        return queue_pass.run(a_round(cluster, now=now), giving_back=("ml/el",))

    assert run(1000.0).evicted == () and run(1000.0 + SHRINK_WAIT - 1).evicted == ()
    assert len(run(1000.0 + SHRINK_WAIT).evicted) == 1, "past the wait, reclaim goes on"
