from __future__ import annotations

import random
from dataclasses import replace

import pytest

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.gang.filter import GangFilterDecision, decide_gang_member
from scheduling.gang.nomination import Nomination, changes, nominations
from scheduling.model import Pod
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of

NODES = [a_node(f"n{i}").build() for i in (1, 2, 3, 4)]  # 8 GPUs each
NAMES = [n.name for n in NODES]


def reserved(live: list[Pod], min_member: int) -> PromiseBook:
    """The book after the gang's first member's filter: ``live`` placed, the rest as stand-ins."""
    decision = decide_gang_member(
        live[0],
        a_gang("g", min_member),
        live,
        NAMES,
        snapshot_of(NODES, live),
        PromiseBook(),
        TopologyCache(),
        now=0.0,
        reservation_ttl=60.0,
    )
    assert decision.planned is not None
    return decision.promises


def test_a_reserved_member_is_nominated_to_its_promised_node() -> None:
    live = members("g", 3, 3)
    book = reserved(live, 3)
    wanted = nominations(book, snapshot_of(NODES, live))
    assert {uid: n.node for uid, n in wanted.items()} == {p.uid: book.by_uid[p.uid].node for p in live}
    assert wanted[live[1].uid] == Nomination("ml", "w1", live[1].uid, book.by_uid[live[1].uid].node)


@pytest.mark.parametrize("seed", range(20))
def test_members_created_later_each_adopt_a_place_on_the_node_they_were_nominated_to(seed: int) -> None:
    """Each late member, offered only its nominated node, gets that node, in any order.

    The nominations hand out each stand-in place once, whatever order kube-scheduler tries them in.
    """
    rng = random.Random(seed)
    gpus = rng.choice((1, 2, 3, 4))
    size, first = rng.randint(3, min(10, len(NODES) * (8 // gpus))), rng.randint(1, 3)
    everyone = members("g", size, gpus)
    book = reserved(everyone[:first], size)
    snapshot = snapshot_of(NODES, everyone)
    wanted = nominations(book, snapshot)
    assert set(wanted) == {p.uid for p in everyone}, "every member, promised or not, is nominated"
    late = everyone[first:]
    rng.shuffle(late)
    for pod in late:
        node = wanted[pod.uid].node
        assert node is not None
        decision = decide_gang_member(
            pod,
            a_gang("g", size),
            everyone,
            [node],
            snapshot,
            book,
            TopologyCache(),
            now=1.0,
            reservation_ttl=60.0,
        )
        assert decision.feasible == (node,), f"{pod.name} nominated to {node}: {decision.verdict}"
        assert decision.planned is None, "adopted a place; the gang was not planned again"
        book = decision.promises


def test_bound_deleted_and_lone_pods_are_not_nominated() -> None:
    live = members("g", 4, 2)
    book = reserved(live, 4)
    bound = replace(live[0], node_name=book.by_uid[live[0].uid].node)
    going = replace(live[1], terminating=True)
    lone = a_pod("alone").gpus(1).build()
    book = book.add(Promise(lone.uid, lone.key, "n1", (0,), 10.0))
    wanted = nominations(book, snapshot_of(NODES, [bound, going, *live[2:], lone]))
    assert set(wanted) == {live[2].uid, live[3].uid}


def test_a_member_no_place_covers_is_not_nominated() -> None:
    live = members("g", 1, 1)
    book = reserved(live, 3)
    big = a_pod("w9").gpus(4).group("g").build()  # the two places are of one GPU
    small = a_pod("w5").gpus(1).group("g").build()
    wanted = nominations(book, snapshot_of(NODES, [*live, big, small]))
    assert big.uid not in wanted and small.uid in wanted


def test_changes_write_new_and_moved_nominations_and_clear_those_whose_promise_ended() -> None:
    live = members("g", 4, 1)
    snapshot = snapshot_of(NODES, [*live[:3], replace(live[3], node_name="n1")])
    wanted = {p.uid: Nomination("ml", p.name, p.uid, "n2") for p in live[:2]}
    written = {
        live[0].uid: Nomination("ml", "w0", live[0].uid, "n2"),  # unchanged: no write
        live[1].uid: Nomination("ml", "w1", live[1].uid, "n3"),  # moved
        live[2].uid: Nomination("ml", "w2", live[2].uid, "n3"),  # its promise ended: cleared
        live[3].uid: Nomination("ml", "w3", live[3].uid, "n1"),  # bound: kube-scheduler's to clear
        "gone": Nomination("ml", "w7", "gone", "n1"),  # deleted: nothing to clear
    }
    assert changes(wanted, written, snapshot) == (
        Nomination("ml", "w1", live[1].uid, "n2"),
        Nomination("ml", "w2", live[2].uid, None),
    )
    assert changes(wanted, wanted, snapshot) == ()


def test_a_member_the_cache_shows_nominated_there_already_needs_no_write() -> None:
    live = members("g", 2, 1)
    shown = replace(live[0], nominated_node="n2")  # the release pass nominated it as it let the gang in
    snapshot = snapshot_of(NODES, [shown, live[1]])
    wanted = {p.uid: Nomination("ml", p.name, p.uid, "n2") for p in live}
    assert changes(wanted, {}, snapshot) == (Nomination("ml", "w1", live[1].uid, "n2"),)


def tried_alone(live: list[Pod], asked: Pod, node: str) -> GangFilterDecision:
    """The filter of ``asked``, a member of a 3-member gang of ``live``, offered ``node`` only."""
    return decide_gang_member(
        asked,
        a_gang("g", 3),
        live,
        [node],
        snapshot_of(NODES, live),
        PromiseBook(),
        TopologyCache(),
        now=0.0,
        reservation_ttl=60.0,
    )


def test_a_gang_the_pass_nominated_is_reserved_as_nominated_when_its_first_member_is_tried_alone() -> None:
    """Three members of 3 GPUs need two 8-GPU nodes; the first tried is offered only its own node."""
    nominated = {"w0": "n1", "w1": "n1", "w2": "n2"}
    live = [replace(p, nominated_node=nominated[p.name]) for p in members("g", 3, 3)]
    decision = tried_alone(live, live[2], "n2")
    assert decision.feasible == ("n2",), decision.verdict
    assert {decision.promises.by_uid[p.uid].node for p in live[:2]} == {"n1"}
    plain = [replace(p, nominated_node=None) for p in live]
    without = tried_alone(plain, plain[2], "n2")
    assert without.feasible == (), "un-nominated, the whole gang is planned on the one node offered"
