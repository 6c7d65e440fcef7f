from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from scheduling.admission.queue_hold import AdmittedBook, hold_for_queue
from scheduling.cluster.promises import PromiseBook
from scheduling.gang.filter import GangFilterDecision, decide_gang_member
from scheduling.gang.stand_in import adopt, is_stand_in, stand_ins
from scheduling.model import ADMISSION_GATE, Pod, PodGroup
from scheduling.queues.view import view_of
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

NODES = [a_node(f"n{i}").build() for i in (1, 2, 3)]  # 8 GPUs each
NAMES = ["n1", "n2", "n3"]


def first_filter(
    pod: Pod,
    group: PodGroup,
    live: list[Pod],
    book: PromiseBook = PromiseBook(),  # noqa: B008
) -> GangFilterDecision:
    return decide_gang_member(
        pod, group, live, NAMES, snapshot_of(NODES), book, TopologyCache(), now=0.0, reservation_ttl=30.0
    )


def test_stand_ins_copy_the_largest_unbound_member_for_each_missing_one() -> None:
    launcher = a_pod("launcher").cpu(500).group("g").build()
    worker = a_pod("worker-0").gpus(4).group("g").build()
    made = stand_ins(a_gang("g", 4), [launcher, worker])
    assert [p.requests.gpus for p in made] == [4, 4]
    assert all(is_stand_in(p.uid) for p in made) and len({p.uid for p in made}) == 2
    assert stand_ins(a_gang("g", 2), [launcher, worker]) == ()


def test_a_member_no_kept_place_covers_has_the_gang_planned_again() -> None:
    worker = a_pod("worker-0").gpus(1).group("g").build()
    first = first_filter(worker, a_gang("g", 3), [worker])
    assert sum(1 for uid in first.promises.by_group["ml/g"] if is_stand_in(uid)) == 2
    big = a_pod("worker-1").gpus(4).group("g").build()  # the places kept are of one GPU: none covers it
    assert adopt(big, "ml/g", NAMES, first.promises) is None
    again = first_filter(big, a_gang("g", 3), [worker, big], first.promises)
    assert again.planned is not None and again.feasible
    kept = again.promises.by_group["ml/g"]
    assert {worker.uid, big.uid} <= kept and sum(1 for uid in kept if is_stand_in(uid)) == 1
    assert again.promises.by_uid[big.uid].gpus and len(again.promises.by_uid[big.uid].gpus) == 4


def test_a_place_is_taken_only_on_a_node_kube_scheduler_offers() -> None:
    worker = a_pod("worker-0").gpus(8).group("g").build()
    first = first_filter(worker, a_gang("g", 2), [worker])
    kept = next(p for p in first.promises.by_uid.values() if is_stand_in(p.pod_uid))
    late = a_pod("worker-1").gpus(8).group("g").build()
    assert adopt(late, "ml/g", [n for n in NAMES if n != kept.node], first.promises) is None
    taken = adopt(late, "ml/g", NAMES, first.promises)
    assert taken is not None and taken.by_uid[late.uid].node == kept.node
    assert taken.by_uid[late.uid].gpus == kept.gpus and taken.by_uid[late.uid].expires_at == kept.expires_at


def test_a_gang_whose_whole_size_does_not_fit_reserves_nothing_and_says_what_it_needs() -> None:
    worker = a_pod("huge-0").gpus(8).group("huge").build()
    decision = first_filter(worker, a_gang("huge", 4), [worker])
    assert decision.feasible == () and decision.promises.by_uid == {}
    assert "needs 32 GPUs for 4 pods (8 per pod); 24 free on 3 nodes" in decision.verdict.message


def test_places_kept_for_missing_members_lapse_with_the_reservation() -> None:
    worker = a_pod("worker-0").gpus(8).group("g").build()
    book, lapsed = first_filter(worker, a_gang("g", 3), [worker]).promises.expire(31.0)
    assert book.by_uid == {} and len(lapsed) == 3


def test_the_queue_hold_counts_the_members_not_created_yet() -> None:
    """A queue limited to 4 GPUs: a gang of 8 one-GPU members is over it from its first member on."""
    first = a_pod("w0").gpus(1).group("g").queue("a").build()
    snapshot = snapshot_of(NODES, [first], [a_gang("g", 8)], queues=[gpu_queue("a", quota=4, limit=4)])
    view = view_of(snapshot, PromiseBook())
    free = snapshot.free_total(PromiseBook())
    answer = hold_for_queue(first, snapshot, PromiseBook(), view, AdmittedBook(), now=0.0, free=free)
    assert answer.held == "queue a: over its GPU limit (limit 4, allocated 0, this job needs 8)"


def test_a_gang_whose_missing_members_stopped_coming_waits_and_holds_nothing() -> None:
    worker = a_pod("worker-0").gpus(1).group("g").created("2026-01-01T00:00:00Z").build()
    made = datetime.fromisoformat(worker.created).timestamp()

    def at(wall: float) -> GangFilterDecision:
        return decide_gang_member(
            worker, a_gang("g", 4), [worker], NAMES, snapshot_of(NODES), PromiseBook(), TopologyCache(),
            now=0.0, reservation_ttl=60.0, wall=wall,
        )  # fmt: skip

    assert at(made + 59).feasible and len(at(made + 59).promises.by_group["ml/g"]) == 4
    late = at(made + 61)
    assert late.feasible == () and late.promises.by_uid == {}
    assert late.verdict.message == "gang ml/g: waiting for members: 1 of 4 pods exist"


def test_a_gated_gang_gets_no_stand_ins_the_release_pass_lets_it_through_whole() -> None:
    worker = replace(a_pod("worker-0").gpus(1).group("g").build(), gates=(ADMISSION_GATE,))
    assert stand_ins(a_gang("g", 4), [worker]) == ()
