from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import pytest

from extender.gang_bind import GangBinder, GangTeller
from extender.ledger import PromiseLedger
from extender.nudger import Nudger
from extender.service import Extender, UnknownNodeError
from extender.view_keeper import ViewKeeper
from kubeio.binding import BindRefusedError
from kubeio.errors import UnavailableError
from scheduling.cluster.promises import Promise
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.queues import Queue
from tests.builders import (
    FakeBinder,
    FakeCluster,
    FakePlanWriter,
    a_gang,
    a_ledger,
    a_node,
    a_pod,
    snapshot_of,
)
from tests.extender.test_nudger import Toucher, run
from tests.scheduling.queues.builders import gpu_queue


def time() -> float:  # the clock of the decisions below
    return 0.0


def make(
    cluster: FakeCluster, binder: FakeBinder | None = None, now: list[float] | None = None
) -> tuple[Extender, FakeBinder]:
    binder = binder or FakeBinder(cluster)
    clock = now or [0.0]
    return Extender(cluster, binder, clock=lambda: clock[0], promise_ttl=60.0), binder


def test_bind_writes_the_lowest_free_gpus_into_the_binding() -> None:
    cluster = FakeCluster().add(
        a_node("n1").build(), a_pod("old").gpus(2).on("n1", [0, 2]).build(), a_pod("p").gpus(3).build()
    )
    ext, binder = make(cluster)
    outcome = ext.bind("ml", "p", "uid-ml-p", "n1")
    assert (outcome.error, outcome.outcome, outcome.gpus) == ("", "bound", (1, 3, 4))
    assert binder.calls == [("ml/p", "uid-ml-p", "n1", {"phalanx.io/gpus": "1,3,4"})]


def test_gpus_promised_but_not_yet_seen_bound_are_not_given_twice() -> None:
    cluster = FakeCluster().add(
        a_node("n1").build(),
        a_pod("a").gpus(4).build(),
        a_pod("b").gpus(4).build(),
        a_pod("c").gpus(1).build(),
    )
    binder = FakeBinder(cluster, apply=False)  # the cache never shows the binds: only promises protect
    ext, _ = make(cluster, binder)
    assert ext.bind("ml", "a", "uid-ml-a", "n1").gpus == (0, 1, 2, 3)
    assert ext.bind("ml", "b", "uid-ml-b", "n1").gpus == (4, 5, 6, 7)
    third = ext.bind("ml", "c", "uid-ml-c", "n1")
    assert third.outcome == "no_gpus"
    assert "only 0 GPUs free" in third.error


def test_concurrent_binds_never_share_a_gpu() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), *[a_pod(f"p{i}").gpus(1).build() for i in range(8)])
    ext, binder = make(cluster, FakeBinder(FakeCluster(), apply=False))
    binder.cluster = cluster
    start = threading.Barrier(8)

    def bind(i: int) -> tuple[int, ...]:
        start.wait()
        return ext.bind("ml", f"p{i}", f"uid-ml-p{i}", "n1").gpus

    with ThreadPoolExecutor(8) as pool:
        got = sorted(g for gpus in pool.map(bind, range(8)) for g in gpus)
    assert got == list(range(8))


def test_a_retried_bind_of_a_bound_pod_is_success_without_a_second_binding() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_pod("p").gpus(2).build())
    ext, binder = make(cluster)
    first = ext.bind("ml", "p", "uid-ml-p", "n1")
    again = ext.bind("ml", "p", "uid-ml-p", "n1")
    assert (first.outcome, again.outcome, again.error) == ("bound", "already_bound", "")
    assert again.gpus == first.gpus
    assert len(binder.calls) == 1


def test_bind_to_another_node_than_the_bound_one_fails_with_a_reason() -> None:
    cluster = FakeCluster().add(
        a_node("n1").build(), a_node("n2").build(), a_pod("p").gpus(1).on("n1", [0]).build()
    )
    ext, binder = make(cluster)
    outcome = ext.bind("ml", "p", "uid-ml-p", "n2")
    assert outcome.error == "pod ml/p is already bound to node n1"
    assert binder.calls == []


def test_a_recreated_pod_is_not_bound() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_pod("p").gpus(1).uid("new").build())
    ext, binder = make(cluster)
    assert "re-created" in ext.bind("ml", "p", "old", "n1").error
    assert binder.calls == []


@pytest.mark.parametrize(
    "failure",
    [
        BindRefusedError(409, "Conflict", "pod is being deleted"),
        UnavailableError(0, "Unavailable", "connection refused"),
    ],
    ids=["refused", "api-down"],
)
def test_a_failed_binding_releases_its_gpus(failure: Exception) -> None:
    cluster = FakeCluster().add(a_node("n1").gpus(2).build(), a_pod("p").gpus(2).build())
    binder = FakeBinder(cluster)
    binder.fail_with = failure  # type: ignore[assignment]
    ext, _ = make(cluster, binder)
    outcome = ext.bind("ml", "p", "uid-ml-p", "n1")
    assert outcome.error
    assert ext.promises.by_uid == {}
    assert ext.filter(a_pod("q").gpus(2).build(), ("n1",)).feasible == ("n1",)


def test_promises_end_when_the_cache_shows_the_pod_bound_or_they_lapse() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_pod("a").gpus(1).build(), a_pod("b").gpus(1).build())
    now = [0.0]
    ext, _ = make(cluster, FakeBinder(cluster, apply=False), now)
    ext.bind("ml", "a", "uid-ml-a", "n1")
    ext.bind("ml", "b", "uid-ml-b", "n1")
    bound_a = cluster.pods["ml/a"]
    ext.pod_changed(bound_a, replace(bound_a, node_name="n1", gpu_indices=(0,)))
    assert set(ext.promises.by_uid) == {"uid-ml-b"}
    now[0] = 61.0
    cluster.add(a_pod("c").gpus(1).build())
    ext.bind("ml", "c", "uid-ml-c", "n1")  # expiry runs on the next promise
    assert set(ext.promises.by_uid) == {"uid-ml-c"}


def test_unknown_nodes_in_bind_and_preempt_are_bad_requests() -> None:
    ext, binder = make(FakeCluster().add(a_node("n1").build(), a_pod("p").gpus(1).build()))
    with pytest.raises(UnknownNodeError):
        ext.bind("ml", "p", "uid-ml-p", "ghost")
    with pytest.raises(UnknownNodeError):
        ext.preempt(a_pod("p").build(), {"ghost": (("u",), 0)})
    assert binder.calls == []
    assert ext.preempt(a_pod("p").build(), {"n1": (("u",), 0)}) == {"n1": (("u",), 0)}


def test_promises_on_a_node_that_goes_not_ready_or_is_deleted_are_released_gangs_whole() -> None:
    nodes = [a_node(n).build() for n in ("n1", "n2", "n3")]
    alone = a_pod("alone").gpus(1).build()
    w0, w1 = (a_pod(f"w{i}").gpus(8).group("g").build() for i in range(2))
    ext, _ = make(FakeCluster().add(*nodes, alone, w0, w1))
    ext.ledger = a_ledger(
        [
            Promise(alone.uid, alone.key, "n1", (0,), 100.0, alone.requests),
            Promise(w0.uid, w0.key, "n1", tuple(range(1, 8)), 100.0, w0.requests, "ml/g"),
            Promise(w1.uid, w1.key, "n2", tuple(range(8)), 100.0, w1.requests, "ml/g"),
            Promise("other", "ml/other", "n3", (0,), 100.0),
        ]
    )
    ext.node_changed("n3", nodes[2], a_node("n3").cordoned().build())  # a drain: bound pods still run
    ext.node_changed("n2", None, nodes[1])  # a node that appears ends nothing
    assert len(ext.promises.by_uid) == 4
    ext.node_changed("n1", nodes[0], a_node("n1").not_ready().build())
    assert set(ext.promises.by_uid) == {"other"}, "n1's promises and the gang's whole reservation end"
    ext.node_changed("n3", nodes[2], None)
    assert ext.promises.by_uid == {}


@dataclass
class QueuedCluster(FakeCluster):
    queues: list[Queue] = field(default_factory=list)

    def snapshot(self) -> ClusterSnapshot:
        return snapshot_of(self.nodes.values(), self.pods.values(), self.groups.values(), self.queues)


def test_a_pod_admitted_then_found_no_node_stops_counting_against_its_queue() -> None:
    """An admission entry lives only while its group may still get a node."""
    pod = a_pod("p").gpus(4).queue("b").build()
    cluster = QueuedCluster(queues=[gpu_queue("b", quota=8, limit=8)]).add(a_node("n1").build(), pod)
    holder: list[Extender] = []
    keeper = ViewKeeper(cluster.snapshot, lambda: holder[0].ledger.book)
    ext = Extender(cluster, FakeBinder(cluster), clock=lambda: 0.0, promise_ttl=60.0, views=keeper)
    holder.append(ext)
    keeper.refresh()
    assert ext.filter(pod, ("n1",)).feasible == ("n1",)
    assert set(keeper.admitted.by_group) == {"ml/p"}
    cluster.add(a_pod("filler").gpus(6).on("n1", range(6)).build())  # only 2 GPUs left
    assert ext.filter(pod, ("n1",)).feasible == ()
    assert keeper.admitted.by_group == {}


def test_a_group_ahead_keeps_its_room_only_while_kube_scheduler_keeps_trying_it() -> None:
    """A group ahead that kube-scheduler is not trying must not idle the room (a soak collapsed on it)."""
    big = a_pod("big").gpus(6).queue("a").created("2026-01-01T00:00:00Z").build()
    late = a_pod("late").gpus(4).queue("a").created("2026-01-02T00:00:00Z").build()
    cluster = QueuedCluster(queues=[gpu_queue("a", quota=8)]).add(a_node("n1").build(), big, late)
    clock = [100.0]
    holder: list[Extender] = []
    keeper = ViewKeeper(cluster.snapshot, lambda: holder[0].ledger.book)
    ext = Extender(cluster, FakeBinder(cluster), clock=lambda: clock[0], promise_ttl=60.0, views=keeper)
    holder.append(ext)
    keeper.refresh()
    cluster.add(a_pod("filler").gpus(1).on("n1", [7]).build())  # 7 free: big alone fits, not with late
    keeper.refresh()
    ext.filter(big, ("n1",))  # kube-scheduler tries big (and, say, its bind is still on its way)
    keeper.withdraw(big.key)
    held = ext.filter(late, ("n1",))
    assert held.feasible == ()
    assert "needed by 1 group(s) ahead of this one (ml/big of queue a need 6)" in held.rejected["n1"].message
    clock[0] += 60.0  # big has not been tried since: kube-scheduler is busy elsewhere
    assert ext.filter(late, ("n1",)).feasible == ("n1",)


def test_the_tried_book_stays_bounded_by_the_groups_being_tried() -> None:
    keeper = ViewKeeper(lambda: snapshot_of([], []), lambda: a_ledger([]).book)
    for i in range(5_000):
        keeper.tried_now(f"ml/g{i}", float(i))
    assert len(keeper.tried.at) < 1_100
    assert keeper.tried.fresh("ml/g4999", 4_999.0, 1.0)


def test_a_gang_that_can_never_be_reserved_is_told_so_from_its_first_member() -> None:
    """Three 8-GPU nodes and a 4 x 8-GPU gang: the first member, alone, hears what the whole gang needs."""
    nodes = [a_node(f"n{i}").gpus(8).build() for i in range(3)]
    members = [a_pod(f"huge-{i}").gpus(8).group("huge").build() for i in range(4)]
    cluster = FakeCluster().add(*nodes, a_gang("huge", 4), members[0])
    binder = FakeBinder(cluster)
    toucher = Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    ledger, teller = PromiseLedger(), GangTeller(None, None, time)
    writer = FakePlanWriter(cluster)
    gangs = GangBinder(
        cluster.snapshot, ledger, writer, binder.bind, clock=time, teller=teller, node_gone=binder.node_gone
    )
    ext = Extender(cluster, binder, clock=time, promise_ttl=60.0, gangs=gangs, nudger=nudger, ledger=ledger)
    names = tuple(n.name for n in nodes)
    first = ext.filter(members[0], names)
    assert first.feasible == () and ledger.book.by_uid == {}
    said = {r.message for r in first.rejected.values()}
    assert said == {
        "gang ml/huge: needs 32 GPUs for 4 pods (8 per pod); 24 free on 3 nodes, at most 8 on one node"
    }
    cluster.add(*members[1:])
    assert ext.filter(members[3], names).feasible == ()
    assert run(nudger, toucher, None) == []  # nobody was told a reason that has changed since


def test_a_gang_reserved_at_its_first_member_gives_its_room_back_when_its_last_member_is_deleted() -> None:
    """A 3 x 8-GPU gang reserves all three nodes at its first member; a single pod waits behind it.

    The places of the two members not created yet belong to no pod. When the one member is deleted,
    the whole reservation ends at once, and the pod turned down for lack of room is woken: with every
    pod waiting, kube-scheduler makes no call that would notice the reservation lapse.
    """
    nodes = [a_node(f"n{i}").gpus(8).build() for i in range(3)]
    first = a_pod("trio-0").gpus(8).group("trio").build()
    single = a_pod("single").gpus(8).build()
    cluster = FakeCluster().add(*nodes, a_gang("trio", 3), first, single)
    binder, toucher = FakeBinder(cluster), Toucher()
    nudger = Nudger(toucher, clock=lambda: 0.0)
    ledger, teller = PromiseLedger(), GangTeller(None, None, time)
    gangs = GangBinder(
        cluster.snapshot,
        ledger,
        FakePlanWriter(cluster),
        binder.bind,
        clock=time,
        teller=teller,
        node_gone=binder.node_gone,
    )
    ext = Extender(cluster, binder, clock=time, promise_ttl=60.0, gangs=gangs, nudger=nudger, ledger=ledger)
    names = tuple(n.name for n in nodes)
    assert ext.filter(first, names).feasible, "the gang is reserved whole at its first member"
    assert len(ledger.book.by_group["ml/trio"]) == 3, "one place each for the two members not created yet"
    assert ext.filter(single, names).feasible == (), "no room left beside the reservation"
    del cluster.pods[first.key]
    ext.pod_changed(first, None)
    assert "ml/trio" not in ledger.book.by_group
    assert run(nudger, toucher, None) == [("ml", "single")], "woken: the room is back"
    assert ext.filter(single, names).feasible
