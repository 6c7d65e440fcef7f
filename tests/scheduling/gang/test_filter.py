from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.filter import GangFilterDecision, decide_gang_member
from scheduling.model import Pod, PodGroup
from scheduling.reasons import Code
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of

NODES = [a_node(f"n{i}").build() for i in (1, 2, 3)]
NAMES = ["n1", "n2", "n3"]


def decide(
    pod: Pod,
    group: PodGroup | None,
    gang: list[Pod],
    book: PromiseBook,
    snap: ClusterSnapshot | None = None,
    now: float = 0.0,
) -> GangFilterDecision:
    return decide_gang_member(
        pod,
        group,
        gang,
        NAMES,
        snap or snapshot_of(NODES),
        book,
        TopologyCache(),
        now=now,
        reservation_ttl=30.0,
    )


def test_the_first_member_reserves_the_whole_gang_and_later_members_get_their_node() -> None:
    gang = members("g", 4, 4)
    first = decide(gang[0], a_gang("g", 4), gang, PromiseBook())
    assert first.planned is not None
    assert set(first.promises.by_group["ml/g"]) == {p.uid for p in gang}
    assert len(first.feasible) == 1
    for member in gang[1:]:
        later = decide(member, a_gang("g", 4), gang, first.promises)
        assert later.planned is None
        assert later.promises is first.promises
        assert later.feasible == (first.promises.by_uid[member.uid].node,)
        assert not later.rejected  # kube-scheduler reads no other node's status when one passes


def test_a_repeated_filter_gives_the_same_answer() -> None:
    gang = members("g", 2, 8)
    first = decide(gang[1], a_gang("g", 2), gang, PromiseBook())
    again = decide(gang[1], a_gang("g", 2), gang, first.promises)
    assert again.feasible == first.feasible
    assert again.promises is first.promises


def test_a_gang_with_missing_members_is_reserved_whole_and_each_member_takes_a_place() -> None:
    gang = members("g", 8, 1)
    first = decide(gang[0], a_gang("g", 8), gang[:1], PromiseBook())
    assert first.planned is not None and len(first.feasible) == 1
    assert len(first.promises.by_group["ml/g"]) == 8
    assert first.verdict.message.startswith("gang ml/g: 1 pod and 7 not created yet reserved on 1 nodes")
    book = first.promises
    for i in range(1, 8):  # created one by one: each takes a place kept for it, nothing is planned again
        later = decide(gang[i], a_gang("g", 8), gang[: i + 1], book)
        assert later.planned is None
        assert later.feasible == (later.promises.by_uid[gang[i].uid].node,)
        book = later.promises
    assert set(book.by_group["ml/g"]) == {p.uid for p in gang}
    assert sorted(g for p in book.by_uid.values() for g in p.gpus) == list(range(8))


def test_a_missing_podgroup_is_said() -> None:
    pod = a_pod("w0").gpus(1).group("g").build()
    decision = decide(pod, None, [pod], PromiseBook())
    assert decision.verdict.message == "gang ml/g: waiting for PodGroup ml/g to be created"


def test_two_gangs_that_each_need_two_thirds_never_both_reserve() -> None:
    a, b = members("a", 2, 8, prefix="a"), members("b", 2, 8, prefix="b")
    first = decide(a[0], a_gang("a", 2), a, PromiseBook())
    second = decide(b[0], a_gang("b", 2), b, first.promises)
    assert first.feasible and not second.feasible
    assert "needs 16 GPUs for 2 pods (8 per pod); 8 free on 1 node" in second.verdict.message
    assert set(second.rejected) == set(NAMES)  # every candidate turned down, unresolvably, with the sentence
    assert {(r.code, r.message) for r in second.rejected.values()} == {
        (Code.UNRESOLVABLE, second.verdict.message)
    }
    assert "ml/b" not in second.promises.by_group


def test_an_expired_reservation_frees_the_capacity() -> None:
    a, b = members("a", 2, 8, prefix="a"), members("b", 2, 8, prefix="b")
    first = decide(a[0], a_gang("a", 2), a, PromiseBook())
    book, lapsed = first.promises.expire(31.0)
    assert {p.pod_uid for p in lapsed} == {p.uid for p in a}
    assert decide(b[0], a_gang("b", 2), b, book).feasible


def test_members_differ_a_cpu_launcher_joins_the_gang() -> None:
    gang = [*members("g", 16, 1), a_pod("launcher").cpu(1000).group("g").build()]
    decision = decide(gang[-1], a_gang("g", 17), gang, PromiseBook())
    assert len(decision.promises.by_group["ml/g"]) == 17
    assert decision.feasible


def test_a_member_whose_reserved_node_is_not_offered_replans() -> None:
    gang = members("g", 2, 8)
    first = decide(gang[0], a_gang("g", 2), gang, PromiseBook())
    node = first.promises.by_uid[gang[1].uid].node
    others = [n for n in NAMES if n != node]
    again = decide_gang_member(
        gang[1],
        a_gang("g", 2),
        gang,
        others,
        snapshot_of(NODES),
        first.promises,
        TopologyCache(),
        now=0.0,
        reservation_ttl=30.0,
    )
    assert again.planned is not None
    assert again.promises.by_uid[gang[1].uid].node in others


def test_bound_members_count_towards_min_member() -> None:
    gang = members("g", 3, 2)
    bound = [replace(gang[0], node_name="n1", gpu_indices=(0, 1), phase="Running"), *gang[1:]]
    snap = snapshot_of(NODES, bound)
    decision = decide(gang[1], a_gang("g", 3), bound, PromiseBook(), snap)
    assert set(decision.promises.by_group["ml/g"]) == {gang[1].uid, gang[2].uid}


@given(
    started_at=st.none() | st.floats(0, 2e9),
    phase=st.sampled_from(["Pending", "Unknown"]),
    created=st.sampled_from(["", "2026-11-22T09:16:55Z"]),
    labels=st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"]), max_size=2),
    which=st.integers(0, 3),
)
def test_the_request_copy_of_a_member_is_the_same_member_by_uid(
    started_at: float | None, phase: str, created: str, labels: dict[str, str], which: int
) -> None:
    """kube-scheduler's copy may be a moment ahead of the cache's: the whole gang is still reserved."""
    gang = members("g", 4, 4)
    cached = gang[which]
    asked = replace(
        cached, started_at=started_at, phase=phase, created=created, labels={**cached.labels, **labels}
    )
    decision = decide(asked, a_gang("g", 4), gang, PromiseBook())
    assert decision.planned is not None
    assert set(decision.promises.by_group["ml/g"]) == {p.uid for p in gang}
    assert decision.feasible == (decision.promises.by_uid[cached.uid].node,)
