from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from prometheus_client import CollectorRegistry

from extender.extender_metrics import GangMetrics
from extender.gang_bind import GangBind, GangBinder, GangSettings, GangTeller
from kubeio.binding import BindStatus
from kubeio.errors import KubeError
from scheduling.cluster.promises import Promise
from scheduling.gang.record import decode_plan
from scheduling.model import Pod
from scheduling.plan import Assignment
from tests.builders import (
    FakeBinder,
    FakeCluster,
    FakeEvents,
    FakePlanWriter,
    a_gang,
    a_ledger,
    a_node,
    a_pod,
)

GANG = [a_pod(f"w{i}").gpus(2).group("g").build() for i in range(3)]
GPUS = {pod.uid: (2 * i, 2 * i + 1) for i, pod in enumerate(GANG)}


class Clock:
    """A clock the test moves; it remembers which threads asked it (a barrier asks while it waits)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.askers: set[int] = set()

    def __call__(self) -> float:
        self.askers.add(threading.get_ident())
        return self.now


def eventually(condition: Callable[[], bool]) -> None:
    """Wait for ``condition``, polling; fail (not hang) if it never holds."""
    pause = threading.Event()
    for _ in range(1000):
        if condition():
            return
        pause.wait(0.01)
    pytest.fail("the condition never held")


class Rig:
    """A GangBinder over a fake cluster with the whole gang reserved on n1; binds and plan writes in order."""

    def __init__(self, *, bind_wait: float = 25.0) -> None:
        self.cluster = FakeCluster().add(a_node("n1").build(), a_gang("g", len(GANG)), *GANG)
        self.calls: list[tuple[str, str, str | None]] = []  # plan writes and binds, in order
        self.writer = FakePlanWriter(self.cluster, self.calls)
        self.binder = FakeBinder(self.cluster)
        self.events = FakeEvents()
        self.clock = Clock()
        self.ledger = a_ledger(
            Promise(p.uid, p.key, "n1", GPUS[p.uid], 100.0, p.requests, "ml/g") for p in GANG
        )
        self.gangs = GangBinder(
            self.cluster.snapshot,
            self.ledger,
            self.writer,
            self.bind,
            clock=self.clock,
            teller=GangTeller(self.events, None, lambda: 0.0),
            node_gone=self.binder.node_gone,
            settings=GangSettings(bind_wait=bind_wait),
        )
        self.pool = ThreadPoolExecutor(len(GANG))

    def bind(
        self, namespace: str, name: str, uid: str, node: str, annotations: Mapping[str, str]
    ) -> BindStatus:
        self.calls.append(("bind", f"{namespace}/{name}", node))
        return self.binder.bind(namespace, name, uid, node, annotations)

    def __enter__(self) -> Rig:
        return self

    def __exit__(self, *_: object) -> None:
        self.pool.shutdown(wait=True)

    def start(self, pod: Pod) -> Future[GangBind]:
        return self.pool.submit(self.gangs.bind, pod, "n1")

    def waiting(self, count: int) -> None:
        """Wait until ``count`` members are inside the barrier (each asks the clock as it waits)."""
        eventually(lambda: len(self.clock.askers - {threading.get_ident()}) >= count)


def test_the_barrier_releases_every_member_when_the_last_arrives_and_the_plan_comes_first() -> None:
    with Rig() as rig:
        first = [rig.start(pod) for pod in GANG[:2]]
        rig.waiting(2)
        assert rig.calls == []
        last = rig.start(GANG[2])
        results = [f.result(timeout=10) for f in [*first, last]]
        assert [(r.error, r.outcome, r.gpus) for r in results] == [("", "bound", GPUS[p.uid]) for p in GANG]
        (write, key, written), *binds, clear = rig.calls
        assert (write, key) == ("set_plan", "ml/g"), "the leader writes the plan before any Binding"
        assert clear == ("set_plan", "ml/g", None), "every member bound: the plan annotation goes"
        assert sorted(binds) == [("bind", p.key, "n1") for p in GANG]
        assert written is not None
        assert sorted(decode_plan(written, "ml").assignments, key=lambda a: a.pod) == [
            Assignment(p.key, p.uid, "n1", GPUS[p.uid]) for p in GANG
        ]
        assert rig.cluster.groups["ml/g"].plan is None
        assert rig.events.reasons() == ["GangBound"]
        assert not rig.gangs.board.active("ml/g")


def test_members_that_do_not_all_arrive_fail_together_and_release_the_reservation() -> None:
    with Rig(bind_wait=0.2) as rig:
        waiting = [rig.start(pod) for pod in GANG[:2]]
        rig.waiting(2)
        rig.clock.now = 1.0  # past the barrier's deadline; waiters look again within 0.2 s
        results = [f.result(timeout=10) for f in waiting]
        message = (
            "gang ml/g: only 2 of 3 members reached bind within 0s; released the reservation, "
            "members will be scheduled again"
        )
        assert [(r.error, r.outcome) for r in results] == [(message, "barrier_timeout")] * 2
        assert rig.calls == []
        assert "ml/g" not in rig.ledger.book.by_group
        assert rig.events.events == [("PodGroup", "g", "Warning", "GangBindTimeout", message)]


def test_when_the_leader_cannot_record_the_plan_no_member_binds() -> None:
    with Rig() as rig:
        rig.writer.fail_with = KubeError(500, "InternalError", "etcd is down")
        results = [f.result(timeout=10) for f in [rig.start(pod) for pod in GANG]]
        assert [r.outcome for r in results] == ["plan_failed"] * len(GANG), results
        assert all(r.error.startswith("gang ml/g: the bind plan could not be recorded") for r in results)
        assert not [call for call in rig.calls if call[0] == "bind"]
        assert rig.ledger.book.by_uid == {}
        assert rig.cluster.groups["ml/g"].plan is None
        assert not [e for e in rig.events.events if e[3] == "GangBound"]


def test_a_gang_whose_node_left_while_its_members_waited_binds_no_member() -> None:
    """The API server takes a Binding to a deleted node; the pod garbage collector then deletes the pod."""
    with Rig() as rig:
        del rig.cluster.nodes["n1"]  # deleted; the cache's listener has not released the promises yet
        results = [f.result(timeout=10) for f in [rig.start(pod) for pod in GANG]]
        assert [r.outcome for r in results] == ["plan_failed"] * len(GANG), results
        assert not [call for call in rig.calls if call[0] == "bind"]
        assert rig.ledger.book.by_uid == {}, "the reservation goes: the gang is planned again whole"
        assert [e[3] for e in rig.events.events] == ["GangBindAbandoned"]
        assert "node n1 left the cluster or is not Ready" in rig.events.events[0][4]


def test_a_gang_whose_node_the_api_server_deleted_before_the_cache_knew_binds_no_member() -> None:
    """The cache still has the node (a watch lag); the leader's read of the API server does not."""
    with Rig() as rig:
        rig.binder.deleted_nodes.add("n1")
        results = [f.result(timeout=10) for f in [rig.start(pod) for pod in GANG]]
        assert [r.outcome for r in results] == ["plan_failed"] * len(GANG), results
        assert rig.calls == [], "no plan written, no Binding"
        assert rig.ledger.book.by_uid == {}, "the reservation goes: the gang is planned again whole"
        assert [e[3] for e in rig.events.events] == ["GangBindAbandoned"]
        assert "node n1 was deleted" in rig.events.events[0][4]


def after_the_plan(rig: Rig, then: Callable[[], None]) -> None:
    """Make ``then`` happen right after the leader writes the gang's plan, before any Binding."""
    original = rig.writer.set_plan

    def set_plan_then(namespace: str, name: str, plan: str | None) -> None:
        original(namespace, name, plan)
        if plan is not None:
            then()

    rig.writer.set_plan = set_plan_then  # type: ignore[method-assign]


def test_a_member_whose_reservation_goes_after_the_plan_is_not_bound() -> None:
    """The node may go between the plan and a member's Binding (a busy extender): that member waits."""
    with Rig() as rig:
        # what the node listener does on the node's deletion
        after_the_plan(rig, lambda: rig.ledger.release_group("ml/g"))
        results = [f.result(timeout=10) for f in [rig.start(pod) for pod in GANG]]
        assert {r.outcome for r in results} == {"no_reservation"}, results
        assert not [call for call in rig.calls if call[0] == "bind"]


def test_a_node_the_api_server_deleted_after_the_plan_gets_no_binding_though_the_cache_lags() -> None:
    """The soak's lost gang: bound to its node 0.35 s after the deletion, before the cache knew."""
    with Rig() as rig:
        # the cache still lists n1, its promises still held
        after_the_plan(rig, lambda: rig.binder.deleted_nodes.add("n1"))
        results = [f.result(timeout=10) for f in [rig.start(pod) for pod in GANG]]
        assert {r.outcome for r in results} == {"no_reservation"}, results
        assert {r.error.partition(": ")[2].partition(": ")[2] for r in results} == {"node n1 was deleted"}
        assert not [call for call in rig.calls if call[0] == "bind"]
        assert rig.cluster.groups["ml/g"].plan is not None, "left for recovery, which rolls the gang back"


def test_a_member_without_its_reservation_does_not_enter_the_barrier() -> None:
    with Rig() as rig:
        rig.ledger.release(GANG[0].uid)
        result = rig.gangs.bind(GANG[0], "n1")
        assert result == GangBind(
            "gang ml/g: w0 has no reservation (it expired); it will be planned again", "no_reservation"
        )
        assert not rig.gangs.board.active("ml/g")


def test_the_first_seen_table_forgets_the_oldest_gangs_past_its_bound() -> None:
    """Bounded: a gang name filtered once must not stay in the table until it binds, which some never do."""
    registry = CollectorRegistry()
    teller = GangTeller(None, GangMetrics.create(registry), lambda: 0.0)
    for i in range(20_000):  # gangs that never bind: PodGroups deleted, or names no PodGroup has
        teller.seen(f"ml/ghost-{i}")
    teller.bound("ml/ghost-0")
    teller.bound("ml/ghost-19999")
    observed = registry.get_sample_value("phalanx_gang_time_to_bound_seconds_count")
    assert observed == 1, "the oldest gang is forgotten, the newest is still timed"


def test_a_member_whose_wait_ends_while_the_gang_still_grows_is_remembered_and_bound_with_it() -> None:
    """A soak saw 63 of 64 members in the barrier, one wait over, all started again, 126 times: no more."""
    with Rig(bind_wait=10.0) as rig:
        first = rig.start(GANG[0])
        rig.waiting(1)
        rig.clock.now = 8.0
        second = rig.start(GANG[1])  # a new member: the gang makes progress
        rig.waiting(2)
        rig.clock.now = 10.5  # the first member's wait is over, 2.5 s after the last progress
        parked = first.result(timeout=10)
        assert parked.outcome == "barrier_parked", parked
        assert "2 of 3 members have reached bind; the reservation is kept" in parked.error
        assert rig.calls == []
        assert rig.ledger.book.by_uid[GANG[0].uid].expires_at >= 8.0 + 20.0, "renewed as members arrive"
        rig.clock.now = 12.0
        last = rig.start(GANG[2])
        results = [second.result(timeout=10), last.result(timeout=10)]
        assert [(r.error, r.outcome) for r in results] == [("", "bound")] * 2
        (write, _, written), *binds, clear = rig.calls
        assert write == "set_plan" and written is not None
        assert sorted(a.pod for a in decode_plan(written, "ml").assignments) == ["ml/w0", "ml/w1", "ml/w2"]
        assert sorted(binds) == [("bind", p.key, "n1") for p in GANG], "the leader bound the parked member"
        assert clear == ("set_plan", "ml/g", None)
        assert rig.cluster.pods[GANG[0].key].node_name == "n1"


def test_a_remembered_member_that_lost_its_reservation_does_not_count() -> None:
    with Rig(bind_wait=10.0) as rig:
        first = rig.start(GANG[0])
        rig.waiting(1)
        rig.clock.now = 8.0
        second = rig.start(GANG[1])
        rig.waiting(2)
        rig.clock.now = 10.5
        assert first.result(timeout=10).outcome == "barrier_parked"
        rig.ledger.release(GANG[0].uid)  # its pod was deleted, say
        last = rig.start(GANG[2])
        eventually(lambda: len(rig.gangs.board.inside("ml/g")) == 2)
        rig.clock.now = 30.0  # no member arrives any more: the gang fails together, as before
        results = [second.result(timeout=10), last.result(timeout=10)]
        assert [r.outcome for r in results] == ["barrier_timeout"] * 2
        assert rig.calls == []
        assert "ml/g" not in rig.ledger.book.by_group
