from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from kubeio.events import ObjectRef
from kubeio.mpijobs import MpiJob
from placement.gang_pass import GangPass
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.model import Node, Pod, PodGroup, Resources
from tests.builders import a_gang, a_node, a_pod, a_round, snapshot_of


@dataclass
class FakeGangs:
    groups: dict[str, PodGroup] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    statuses: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    node_map: dict[str, Node] | None = None
    done: list[str] = field(default_factory=list)
    """Deletions and event writes, in the order they were made."""

    def snapshot(self) -> ClusterSnapshot:
        return snapshot_of((self.node_map or {}).values(), self.pods.values(), self.groups.values())

    def set_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.statuses.append((name, dict(status)))
        group = self.groups[f"{namespace}/{name}"]
        counts = (status["scheduled"], status["running"], status["succeeded"], status["failed"])
        self.groups[group.key] = replace(group, phase=str(status["phase"]), counts=counts)

    def delete_pod(self, namespace: str, name: str, uid: str, *, grace_seconds: int | None = None) -> bool:
        self.deleted.append(name)
        self.done.append(f"delete {name}")
        self.pods.pop(name, None)
        return True

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.events.append((reason, message))
        self.done.append(f"queue {reason}")

    def record_now(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.events.append((reason, message))
        self.done.append(f"write {reason}")


def running(name: str) -> Pod:
    return a_pod(name).gpus(1).group("g").on("n1", [0]).build()


def test_status_is_written_only_when_it_changes() -> None:
    fake = FakeGangs({"ml/g": a_gang("g", 2)}, {"w0": running("w0"), "w1": running("w1")})
    reconciler = GangPass(fake, fake, clock=lambda: 0.0, grace_seconds=10)
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).statuses == ("ml/g",)
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).statuses == ()
    assert fake.statuses == [
        ("g", {"phase": "Running", "scheduled": 2, "running": 2, "succeeded": 0, "failed": 0})
    ]


def test_a_gang_that_lost_a_member_is_evicted_whole_after_the_grace_period_once() -> None:
    now = [0.0]
    fake = FakeGangs({"ml/g": a_gang("g", 3)}, {f"w{i}": running(f"w{i}") for i in range(3)})
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None))
    del fake.pods["w1"]  # evicted by someone, or its node died
    now[0] = 1.0
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ()
    now[0] = 11.5
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ("ml/g",)
    assert sorted(fake.deleted) == ["w0", "w2"]
    assert [reason for reason, _ in fake.events] == ["GangEvicted"]
    # written before the first deletion, not queued: a crash after the deletions cannot lose it
    assert fake.done == ["write GangEvicted", "delete w0", "delete w2"]
    now[0] = 30.0
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ()


def test_a_member_replaced_within_the_grace_period_saves_the_gang() -> None:
    now = [0.0]
    fake = FakeGangs({"ml/g": a_gang("g", 2)}, {"w0": running("w0"), "w1": running("w1")})
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None))
    del fake.pods["w1"]
    now[0] = 5.0
    reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None))
    fake.pods["w1b"] = running("w1b")
    now[0] = 20.0
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ()
    assert fake.deleted == []


def moved_job(name: str, at: float) -> MpiJob:
    """An elastic MPIJob ``ml/name`` whose last worker move the placement manager wrote at ``at``."""
    return MpiJob("ml", name, f"uid-{name}", name, 2, 2, "4", Resources(gpus=1), None, moved_at=at)


def test_a_gang_short_because_its_workers_were_moved_gets_the_grace_period_after_the_move() -> None:
    """Both workers moved at once (a resize): the job is short until its operator re-creates them."""
    now = [0.0]
    members = {name: running(name) for name in ("launcher", "w0", "w1")}
    fake = FakeGangs({"ml/g": a_gang("g", 3)}, members)
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake, now=1000.0))
    del fake.pods["w0"], fake.pods["w1"]  # deleted by the move, not re-created yet
    jobs = [moved_job("g", 1000.0)]
    for monotonic, wall in ((1.0, 1001.0), (9.0, 1009.0), (12.0, 1009.9)):
        now[0] = monotonic
        assert reconciler.run(a_round(fake, mpijobs=jobs, now=wall)).evicted == ()
    now[0] = 13.0  # the move is 10.5 s old: the shortage counts from here
    assert reconciler.run(a_round(fake, mpijobs=jobs, now=1010.5)).evicted == ()
    now[0] = 22.0
    assert reconciler.run(a_round(fake, mpijobs=jobs, now=1019.5)).evicted == ()
    now[0] = 23.5
    assert reconciler.run(a_round(fake, mpijobs=jobs, now=1021.0)).evicted == ("ml/g",)
    assert fake.deleted == ["launcher"]


@pytest.mark.parametrize(
    "moved_at",
    [900.0, 5000.0],
    ids=["this job's move long ago", "this job's move stamped far ahead (a clock stepped back)"],
)
def test_a_move_of_another_job_or_out_of_the_window_does_not_excuse_a_short_gang(moved_at: float) -> None:
    now = [0.0]
    fake = FakeGangs({"ml/g": a_gang("g", 2)}, {"w0": running("w0"), "w1": running("w1")})
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake, now=1000.0))
    del fake.pods["w1"]
    jobs = [moved_job("other", 1000.0), moved_job("g", moved_at)]
    now[0] = 1.0
    reconciler.run(a_round(fake, mpijobs=jobs, now=1001.0))
    now[0] = 11.5
    assert reconciler.run(a_round(fake, mpijobs=jobs, now=1011.5)).evicted == ("ml/g",)


def test_a_gang_marked_failed_keeps_counting_towards_its_eviction() -> None:
    now = [0.0]
    fake = FakeGangs({"ml/g": a_gang("g", 2)}, {"w0": running("w0"), "w1": running("w1")})
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None))
    fake.pods["w1"] = replace(fake.pods["w1"], phase="Failed")
    now[0] = 1.0
    reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None))
    assert fake.groups["ml/g"].phase == "Failed"
    now[0] = 12.0
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ("ml/g",)
    assert fake.deleted == ["w0"]


def test_a_gang_with_a_member_on_a_node_that_went_not_ready_is_evicted_whole_naming_the_node() -> None:
    now = [0.0]
    w1 = a_pod("w1").gpus(1).group("g").on("n2", [0]).build()
    nodes = {"n1": a_node("n1").build(), "n2": a_node("n2").build()}
    fake = FakeGangs({"ml/g": a_gang("g", 2)}, {"w0": running("w0"), "w1": w1}, node_map=nodes)
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None))
    nodes["n2"] = a_node("n2").not_ready().build()  # its kubelet stopped; the API still shows w1 Running
    now[0] = 1.0
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ()
    now[0] = 11.5
    assert reconciler.run(a_round(fake, nodes_listed=fake.node_map is not None)).evicted == ("ml/g",)
    assert sorted(fake.deleted) == ["w0", "w1"]
    assert fake.events == [
        (
            "GangEvicted",
            "gang ml/g: only 1 of 2 members running (1 lost: w1 on node n2, not Ready); "
            "evicting the rest so the gang can be placed again whole",
        )
    ]


def test_a_gang_whose_waiting_members_were_re_pinned_gets_the_grace_period_after_it() -> None:
    """A re-pin deletes waiting workers and writes nothing on the MPIJob: the elastic pass says so."""
    now = [0.0]
    members = {name: running(name) for name in ("launcher", "w0")}
    fake = FakeGangs({"ml/g": a_gang("g", 2)}, members)
    reconciler = GangPass(fake, fake, clock=lambda: now[0], grace_seconds=10)
    reconciler.run(a_round(fake))
    del fake.pods["w0"]  # deleted by a re-pin, not re-created yet
    reconciler.replacing(["ml/g"])
    for at in (1.0, 9.5):
        now[0] = at
        assert reconciler.run(a_round(fake)).evicted == ()
    now[0] = 10.5  # the re-pin is older than the grace period: the shortage counts from here
    assert reconciler.run(a_round(fake)).evicted == ()
    now[0] = 21.0
    assert reconciler.run(a_round(fake)).evicted == ("ml/g",)
