from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.usage import free_gpus
from scheduling.gpu.fit import filter_nodes
from scheduling.model import Node, Pod
from scheduling.reasons import Code, Reason
from tests.builders import a_node, a_pod, snapshot_of


@dataclass(frozen=True)
class Case:
    name: str
    nodes: tuple[Node, ...]
    running: tuple[Pod, ...]
    need: int
    feasible: tuple[str, ...]
    rejected: dict[str, Reason]
    promised: tuple[Promise, ...] = ()


CASES = [
    Case("empty nodes fit", (a_node("a").build(), a_node("b").build()), (), 4, ("a", "b"), {}),
    Case(
        "indexed pods take their GPUs",
        (a_node("a").build(), a_node("b").build()),
        (a_pod("x").gpus(6).on("a", range(6)).build(),),
        4,
        ("b",),
        {"a": Reason.TOO_FEW_FREE_GPUS},
    ),
    Case(
        "pods without an index annotation still count",
        (a_node("a").build(),),
        (a_pod("x").gpus(5).on("a").build(),),
        4,
        (),
        {"a": Reason.TOO_FEW_FREE_GPUS},
    ),
    Case(
        "finished pods hold nothing",
        (a_node("a").build(),),
        (a_pod("x").gpus(8).on("a", range(8)).phase("Succeeded").build(),),
        8,
        ("a",),
        {},
    ),
    Case(
        "promised GPUs are taken",
        (a_node("a").build(),),
        (),
        2,
        (),
        {"a": Reason.RESERVED},
        (Promise("u", "ml/p", "a", tuple(range(7)), 100.0),),
    ),
    Case(
        "node too small is unresolvable",
        (a_node("a").gpus(4).build(),),
        (),
        8,
        (),
        {"a": Reason.TOO_FEW_GPUS},
    ),
    Case("unknown node", (), (), 1, (), {"ghost": Reason.UNKNOWN_NODE}),
    Case("cpu-only pod fits a gpu-less node", (a_node("a").gpus(0).build(),), (), 0, ("a",), {}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_filter(case: Case) -> None:
    book = PromiseBook()
    for promise in case.promised:
        book = book.add(promise)
    candidates = tuple(n.name for n in case.nodes) or tuple(case.rejected)
    decision = filter_nodes(
        a_pod("p").gpus(case.need).build(), candidates, snapshot_of(case.nodes, case.running), book
    )
    assert decision.feasible == case.feasible
    assert {n: r.reason for n, r in decision.rejected.items()} == case.rejected


def test_reasons_say_whether_preemption_can_help() -> None:
    nodes = (a_node("small").gpus(2).build(), a_node("busy").build())
    running = (a_pod("x").gpus(8).on("busy", range(8)).build(),)
    decision = filter_nodes(
        a_pod("p").gpus(4).build(), ("small", "busy", "ghost"), snapshot_of(nodes, running), PromiseBook()
    )
    assert decision.rejected["busy"].code is Code.UNSCHEDULABLE
    assert decision.rejected["small"].code is Code.UNRESOLVABLE
    assert decision.rejected["ghost"].code is Code.UNRESOLVABLE
    assert decision.rejected["busy"].message == "node(s) with too few free GPUs (0 free, pod needs 4)"


def test_candidate_order_is_kept_and_duplicates_decided_once() -> None:
    nodes = (a_node("a").build(), a_node("b").build(), a_node("c").build())
    decision = filter_nodes(
        a_pod("p").gpus(1).build(), ("c", "a", "c", "b"), snapshot_of(nodes), PromiseBook()
    )
    assert decision.feasible == ("c", "a", "b")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[ClusterSnapshot, PromiseBook, Pod, list[str]]:
    nodes = [a_node(f"n{i}").gpus(draw(st.sampled_from([0, 4, 8]))).build() for i in range(6)]
    pods = []
    for i, node in enumerate(nodes):
        taken = draw(st.integers(0, node.gpu_total))
        if taken:
            pods.append(a_pod(f"p{i}").gpus(taken).on(node.name, range(taken)).build())
    promises = [
        Promise(f"u{i}", f"ml/q{i}", node.name, (node.gpu_total - 1,), 100.0)
        for i, node in enumerate(nodes)
        if node.gpu_total and draw(st.booleans())
    ]
    plain = snapshot_of(nodes, pods)
    with_records = replace(
        plain,
        base_free=MappingProxyType(
            {n.name: free_gpus(n, plain.usage_of(n.name), frozenset()) for n in nodes}
        ),
    )
    candidates = [*(n.name for n in nodes), "ghost"]
    need = draw(st.integers(0, 9))
    return (
        with_records,
        PromiseBook.of({p.pod_uid: p for p in promises}),
        a_pod("x").gpus(need).build(),
        candidates,
    )


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_the_fast_path_gives_the_answers_and_reasons_of_the_full_check(
    case: tuple[ClusterSnapshot, PromiseBook, Pod, list[str]],
) -> None:
    snapshot, promises, pod, candidates = case
    without_records = replace(snapshot, base_free=MappingProxyType({}))  # every node takes the full check
    assert filter_nodes(pod, candidates, snapshot, promises) == filter_nodes(
        pod, candidates, without_records, promises
    )
