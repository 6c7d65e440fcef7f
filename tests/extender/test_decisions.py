"""The decision log: the newest turn-down per pod, and nothing that would pin old snapshots for long."""

from __future__ import annotations

from extender.decisions import DecisionLog
from scheduling.admission.queue_hold import AdmittedBook
from scheduling.cluster.promises import PromiseBook
from scheduling.model import Pod
from scheduling.session import FilterInput, FilterOutcome, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of

NODE = a_node("n1").build()  # 8 GPUs


def decide(asked: FilterInput) -> FilterOutcome:
    return filter_pod(asked, topologies=TopologyCache(), settings=SessionSettings())


def turned_down(pod: Pod, others: list[Pod], now: float) -> tuple[FilterInput, FilterOutcome]:
    asked = FilterInput(
        pod, ("n1",), snapshot_of([NODE], [pod, *others]), PromiseBook(), None, AdmittedBook(), now
    )
    outcome = decide(asked)
    assert not outcome.feasible
    return asked, outcome


def big(name: str) -> Pod:
    return a_pod(name).gpus(16).build()


def test_it_keeps_the_newest_turn_down_of_each_pod_and_forgets_a_pod_that_fits() -> None:
    log = DecisionLog()
    a, b = big("a"), big("b")
    log.remember(*turned_down(a, [b], 1.0))
    log.remember(*turned_down(b, [a], 2.0))
    assert len(log) == 2
    fits = FilterInput(
        a_pod("a").gpus(1).build(),
        ("n1",),
        snapshot_of([NODE], [b]),
        PromiseBook(),
        None,
        AdmittedBook(),
        3.0,
    )
    log.remember(fits, decide(fits))
    assert log.last("ml/a") is None
    assert log.last("ml/b") is not None


def test_decisions_of_deleted_pods_and_old_decisions_are_dropped() -> None:
    log = DecisionLog(max_age=300.0)
    a, b, c = big("a"), big("b"), big("c")
    log.remember(*turned_down(a, [b], 0.0))
    log.remember(*turned_down(b, [a], 100.0))
    log.remember(*turned_down(c, [b], 200.0))  # a was deleted meanwhile
    assert (log.last("ml/a"), len(log)) == (None, 2)
    log.remember(*turned_down(c, [b], 450.0))  # b's is 350 s old now
    assert log.last("ml/b") is None
    assert log.last("ml/c") is not None
