from __future__ import annotations

from dataclasses import replace

from extender.barrier import BarrierBoard
from extender.gang_bind import GangTeller
from extender.recovery import GangRecovery
from kubeio.errors import UnavailableError
from scheduling.cluster.promises import Promise
from scheduling.gang.record import encode_plan
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

PLAN = [Assignment(f"ml/w{i}", f"uid-ml-w{i}", "n1", (2 * i, 2 * i + 1)) for i in range(3)]


class Rig:
    """A gang of three planned on n1, w0 bound as planned, the rest as the test leaves them."""

    def __init__(
        self, *, plan: str | None = None, gone: tuple[str, ...] = (), others: tuple[Pod, ...] = ()
    ) -> None:
        group = replace(a_gang("g", 3), plan=encode_plan(PLAN) if plan is None else plan)
        pods = [a_pod("w0").gpus(2).group("g").on("n1", [0, 1]).build()]
        pods += [a_pod(f"w{i}").gpus(2).group("g").build() for i in (1, 2) if f"w{i}" not in gone]
        self.cluster = FakeCluster().add(a_node("n1").build(), group, *pods, *others)
        self.writer = FakePlanWriter(self.cluster)
        self.binder = FakeBinder(self.cluster)
        self.events = FakeEvents()
        self.ledger = a_ledger(Promise(m.uid, m.pod, m.node, m.gpus, 100.0, group="ml/g") for m in PLAN)
        self.board = BarrierBoard(lambda: 0.0)
        self.recovery = GangRecovery(
            self.cluster.snapshot,
            self.ledger,
            self.writer,
            self.binder.bind,
            board=self.board,
            teller=GangTeller(self.events, None, lambda: 0.0),
            node_gone=self.binder.node_gone,
            clock=lambda: 1000.0,
            hold_seconds=300.0,
        )

    @property
    def plan(self) -> str | None:
        return self.cluster.groups["ml/g"].plan


def test_a_half_bound_gang_is_completed_as_planned_and_its_plan_removed() -> None:
    rig = Rig()
    assert rig.recovery.recover_all() == 1
    assert [(key, node, gpus) for key, _, node, gpus in rig.binder.calls] == [
        ("ml/w1", "n1", {"phalanx.io/gpus": "2,3"}),
        ("ml/w2", "n1", {"phalanx.io/gpus": "4,5"}),
    ]
    assert {p.name: p.node_name for p in rig.cluster.pods.values()} == {"w0": "n1", "w1": "n1", "w2": "n1"}
    assert rig.plan is None
    assert rig.events.events == [
        (
            "PodGroup",
            "g",
            "Normal",
            "GangRecovered",
            "gang ml/g: binding the 2 members the interrupted bind left; 1 were bound",
        )
    ]
    # held until the cache shows them bound (``Extender.pod_changed``), so no bind takes those GPUs between
    assert {u: (p.gpus, p.expires_at) for u, p in rig.ledger.book.by_uid.items()} == {
        "uid-ml-w1": ((2, 3), 1300.0),
        "uid-ml-w2": ((4, 5), 1300.0),
    }
    assert rig.recovery.recover_all() == 0, "nothing left for the next pass"


def test_a_gang_that_lost_a_planned_member_is_rolled_back() -> None:
    rig = Rig(gone=("w2",))
    rig.recovery.recover_all()
    assert rig.binder.calls == []
    assert [c for c in rig.writer.calls if c[0] == "delete"] == [("delete", "ml/w0", "uid-ml-w0")]
    assert sorted(rig.cluster.pods) == ["ml/w1"]
    assert rig.plan is None
    assert rig.events.events == [
        (
            "PodGroup",
            "g",
            "Warning",
            "GangRecovered",
            "gang ml/g: the bind was interrupted and members w2 are gone, so the gang cannot be completed; "
            "deleting the 1 bound member(s) still running; the 1 unbound member(s) wait for the gang to be "
            "whole again",
        )
    ]


def test_an_api_failure_mid_recovery_leaves_the_plan_for_the_next_pass() -> None:
    rig = Rig()
    rig.binder.fail_with = UnavailableError(0, "Unavailable", "connection refused")
    rig.recovery.recover_all()
    assert rig.plan == encode_plan(PLAN)
    # written before the first bind, so that a crash after a bind cannot lose it; the retry completes it
    assert rig.events.written_now == ["GangRecovered"]
    assert set(rig.ledger.book.by_uid) == {m.uid for m in PLAN}
    rig.binder.fail_with = None
    assert rig.recovery.recover_all() == 1
    assert rig.plan is None


def test_a_corrupt_plan_is_removed_and_nothing_else_happens() -> None:
    rig = Rig(plan="{not json")
    rig.recovery.recover_all()
    assert rig.writer.calls == [("set_plan", "ml/g", None)]
    assert rig.binder.calls == []
    assert rig.events.events == []


def test_a_gang_inside_its_bind_barrier_is_left_alone() -> None:
    rig = Rig()
    passage = rig.board.join("ml/g", "uid-ml-w0", 1, 5.0)
    assert rig.recovery.recover_all() == 0
    assert rig.writer.calls == [] and rig.binder.calls == []
    rig.board.leave("ml/g", passage, bound=True)
    assert rig.recovery.recover_all() == 1


def test_a_member_that_finished_after_its_binding_counts_as_bound_and_the_gang_is_completed() -> None:
    """The chaos run's stuck gangs: the live cache had no w0 (Succeeded), so the gang was rolled back."""
    rig = Rig()
    w0 = rig.cluster.pods["ml/w0"]
    rig.cluster.pods["ml/w0"] = replace(w0, phase="Succeeded")
    rig.recovery.recover_all()
    assert [key for key, *_ in rig.binder.calls] == ["ml/w1", "ml/w2"]
    assert [c for c in rig.writer.calls if c[0] == "delete"] == []
    assert rig.events.events[-1][2:] == (
        "Normal",
        "GangRecovered",
        "gang ml/g: binding the 2 members the interrupted bind left; 1 were bound (1 of them finished since)",
    )


def test_a_gang_found_bound_whole_has_its_plan_removed_and_nothing_told() -> None:
    """Bound whole: the crash came after the last Binding, or the binder has not removed its plan yet."""
    rig = Rig()
    for name in ("w1", "w2"):
        pod = rig.cluster.pods[f"ml/{name}"]
        rig.cluster.pods[pod.key] = replace(pod, node_name="n1")
    rig.recovery.recover_all()
    assert rig.binder.calls == [] and rig.plan is None
    assert rig.events.events == []


def test_a_plan_whose_node_the_api_server_no_longer_has_is_rolled_back() -> None:
    """The cache still lists n1 (a watch lag); binding there would make pods the garbage collector deletes."""
    rig = Rig()
    rig.binder.deleted_nodes.add("n1")
    rig.recovery.recover_all()
    assert rig.binder.calls == []
    assert [c for c in rig.writer.calls if c[0] == "delete"] == [("delete", "ml/w0", "uid-ml-w0")]
    assert rig.plan is None and rig.ledger.book.by_uid == {}
    assert rig.events.events[-1][2:] == (
        "Warning",
        "GangRecovered",
        "gang ml/g: the bind was interrupted and node n1 was deleted (w1 was planned there), so the gang "
        "cannot be completed; deleting the 1 bound member(s) still running; the 2 unbound member(s) are "
        "planned again",
    )


def test_gpus_another_pod_holds_since_the_plan_are_not_given_twice() -> None:
    """The soak's double-booked GPU: a stale plan carried out onto GPUs another tenant's pod held by then."""
    other = a_pod("x", "team-b").gpus(1).on("n1", [4]).build()
    rig = Rig(others=(other,))
    rig.recovery.recover_all()
    assert rig.binder.calls == []
    assert sorted(rig.cluster.pods) == ["ml/w1", "ml/w2", "team-b/x"]
    assert "GPUs [4] on n1, planned for w2, are held by other pods now" in rig.events.events[-1][4]


def test_only_nodes_the_cache_knows_are_asked_about() -> None:
    """A plan naming nodes nobody has must not turn into one API read per name every pass."""
    plan = [PLAN[0], *(replace(a, node=f"nowhere-{i}") for i, a in enumerate(PLAN[1:]))]
    rig = Rig(plan=encode_plan(plan))
    asked: list[str] = []

    def node_gone(node: str) -> str:
        asked.append(node)
        return ""

    rig.recovery._node_gone = node_gone
    rig.recovery.recover_all()
    assert asked == []
    assert rig.binder.calls == [] and rig.plan is None
    assert "node nowhere-0, planned for w1, left the cluster" in rig.events.events[-1][4]
