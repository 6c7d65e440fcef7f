from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.model import Resources
from scheduling.queues.fair_share import fair_shares
from scheduling.queues.queue_tree import Queue, QueueTree, ResourceQuota
from scheduling.queues.reclaim import ReclaimChoice, ReclaimOutcome, choose_reclaim, choose_reclaims
from scheduling.queues.victims import Fits
from scheduling.queues.workloads import PendingGroup, RunningGang
from tests.scheduling.queues.builders import gang, gpu_queue, gpus, group

NOW = 10_000.0
A_B_C = (gpu_queue("team-a", 8), gpu_queue("team-b", 8), gpu_queue("team-c", 0, weight=2))


def reclaim(
    queues: Sequence[Queue],
    capacity: int,
    running: Sequence[RunningGang],
    job: PendingGroup,
    *,
    demand: dict[str, int] | None = None,
    fits: Fits | None = None,
) -> ReclaimChoice:
    """Allocations come from ``running``; demand is allocations plus the job plus ``demand``."""
    tree = QueueTree.build(queues)
    held: dict[str, int] = {}
    for g in running:
        held[g.queue] = held.get(g.queue, 0) + g.requests.gpus
    wanted = dict(held)
    wanted[job.queue] = wanted.get(job.queue, 0) + job.requests.gpus
    for queue, extra in (demand or {}).items():
        wanted[queue] = wanted.get(queue, 0) + extra
    shares = fair_shares(tree, gpus(capacity), {q: gpus(n) for q, n in wanted.items()})
    return choose_reclaim(
        job,
        tree=tree,
        shares=shares,
        allocated={q: gpus(n) for q, n in held.items()},
        running=running,
        free=gpus(capacity - sum(held.values())),
        now=NOW,
        fits=fits,
    )


@dataclass(frozen=True)
class Case:
    name: str
    queues: tuple[Queue, ...]
    capacity: int
    running: tuple[RunningGang, ...]
    job: PendingGroup
    outcome: ReclaimOutcome
    victims: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    message: str | None = None
    demand: dict[str, int] = field(default_factory=dict)


CASES = [
    Case(
        "the issue's sentence: a borrower with fair share 0 gives back",
        A_B_C,
        16,
        (gang("b1", "team-b", 8, started_at=0), gang("c1", "team-c", 8, started_at=0)),
        group("a1", "team-a", 8),
        ReclaimOutcome.EVICT,
        ("ml/c1",),
        (
            "reclaim: queue team-c is 8 GPUs over its fair share 0; "
            "team-a needs 8 to reach its fair share 8 (group ml/a1)",
        ),
    ),
    Case(
        "just enough whole gangs, youngest first, exact fit last",
        A_B_C,
        24,
        tuple(gang(f"c{i}", "team-c", 4, started_at=100.0 * i) for i in range(6)),
        group("a1", "team-a", 8),
        ReclaimOutcome.EVICT,
        ("ml/c5", "ml/c4"),
        (
            "reclaim: queue team-c is 8 GPUs over its fair share 16; "
            "team-a needs 8 to reach its fair share 8 (group ml/a1)",
            "reclaim: queue team-c is 4 GPUs over its fair share 16; "
            "team-a needs 8 to reach its fair share 8 (group ml/a1)",
        ),
    ),
    Case(
        "lowest priority first, even when older",
        A_B_C,
        16,
        (
            gang("b1", "team-b", 8),
            gang("c-young", "team-c", 4, priority=10, started_at=900),
            gang("c-old", "team-c", 4, priority=0, started_at=0),
        ),
        group("a1", "team-a", 4),
        ReclaimOutcome.EVICT,
        ("ml/c-old",),
    ),
    Case(
        "an exact fit beats several small gangs",
        A_B_C,
        16,
        (
            gang("b1", "team-b", 8),
            *(gang(f"c{i}", "team-c", 2, started_at=i) for i in range(2)),
            gang("c4", "team-c", 4),
        ),
        group("a1", "team-a", 4),
        ReclaimOutcome.EVICT,
        ("ml/c4",),
    ),
    Case(
        "a queue within its fair share is not a victim; a sibling borrower is",
        (
            gpu_queue("org1", 8),
            gpu_queue("t1", 8, parent="org1"),
            gpu_queue("t2", 0, parent="org1"),
            gpu_queue("org2", 8),
            gpu_queue("t3", 8, parent="org2"),
        ),
        16,
        (gang("t2-job", "t2", 8), gang("t3-job", "t3", 8)),
        group("t1-job", "t1", 8),
        ReclaimOutcome.EVICT,
        ("ml/t2-job",),
        (
            "reclaim: queue t2 is 8 GPUs over its fair share 0; "
            "t1 needs 8 to reach its fair share 8 (group ml/t1-job)",
        ),
    ),
    Case(
        "it fits already",
        A_B_C,
        24,
        (gang("c1", "team-c", 8),),
        group("a1", "team-a", 8),
        ReclaimOutcome.FITS,
        message="ml/a1 fits; nothing to reclaim",
    ),
    Case(
        "the beneficiary would go over its fair share",
        A_B_C,
        16,
        (gang("a0", "team-a", 8), gang("c1", "team-c", 8)),
        group("a1", "team-a", 8),
        ReclaimOutcome.NOT_STARVED,
        message="queue team-a: with ml/a1 it would hold 16 GPUs, over its fair share 11; "
        "reclaim only gives a queue back its fair share",
    ),
    Case(
        "a non-preemptible beneficiary stays within its quota",
        (gpu_queue("team-a", 4), gpu_queue("team-c", 0)),
        16,
        (gang("c1", "team-c", 16),),
        group("a1", "team-a", 8, priority=100, preemptible=False),
        ReclaimOutcome.NOT_STARVED,
        message="queue team-a: non-preemptible jobs run only within the queue's quota "
        "(GPU quota 4, 0 held by non-preemptible jobs, this job needs 8)",
    ),
    Case(
        "non-preemptible, too young, or below fair share: nothing to take",
        (*A_B_C[:2], gpu_queue("team-c", 0, weight=2, min_runtime=600)),
        24,
        (
            gang("b1", "team-b", 8),
            gang("b2", "team-b", 4),
            gang("c-pinned", "team-c", 4, preemptible=False),
            gang("c-young", "team-c", 8, started_at=NOW - 60),
        ),
        group("a1", "team-a", 8),
        ReclaimOutcome.NO_VICTIMS,
        # team-a is owed its quota, so team-b (over its quota 8 by b2, within its fair share) may give b2.
        message="reclaim for ml/a1 (queue team-a): cannot free 8 GPUs: 4 GPUs can be taken from queues over "
        "their quota; 1 gang(s) are not preemptible; 1 gang(s) are younger than their queue's minimum "
        "runtime; 1 gang(s) would push their queue below its quota",
        demand={"team-b": 4},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_plan_reclaim(case: Case) -> None:
    choice = reclaim(case.queues, case.capacity, case.running, case.job, demand=case.demand)
    assert choice.outcome is case.outcome, choice.message
    assert tuple(e.gang for e in choice.victims) == case.victims
    if case.reasons:
        assert tuple(e.reason for e in choice.victims) == case.reasons
    if case.message is not None:
        assert choice.message == case.message


def test_kai_1565_a_48_gpu_request_does_not_evict_376_gpus() -> None:
    """48 nodes x 8 GPUs; a borrower holds 376 in 47 gangs of 8; a 48-GPU job in quota needs 40 more."""
    queues = (gpu_queue("team-a", 48), gpu_queue("team-c", 0))
    running = tuple(gang(f"c{i:02}", "team-c", 8, started_at=i) for i in range(47))
    choice = reclaim(queues, 384, running, group("a1", "team-a", 48))
    assert choice.outcome is ReclaimOutcome.EVICT
    assert sum(e.requests.gpus for e in choice.victims) == 40
    assert [e.gang for e in choice.victims] == ["ml/c46", "ml/c45", "ml/c44", "ml/c43", "ml/c42"]
    assert (
        choice.message
        == "reclaim for ml/a1 (queue team-a): evict 5 gang(s) holding 40 GPUs to free the 40 GPUs it lacks"
    )


def test_kai_1565_a_big_young_gang_is_not_taken_when_small_ones_do() -> None:
    queues = (gpu_queue("team-a", 48), gpu_queue("team-c", 0, weight=0))
    running = (
        gang("c-big", "team-c", 256, started_at=999),
        *(gang(f"c{i:02}", "team-c", 8, started_at=i) for i in range(15)),
    )
    choice = reclaim(queues, 384, running, group("a1", "team-a", 48))
    assert [e.requests.gpus for e in choice.victims] == [8] * 5


def test_when_only_a_big_gang_can_cover_the_small_ones_are_spared() -> None:
    queues = (gpu_queue("team-a", 48), gpu_queue("team-c", 0, weight=0))
    running = (
        gang("c-big", "team-c", 64),
        gang("c1", "team-c", 8, started_at=5),
        gang("c2", "team-c", 8, started_at=6),
    )
    choice = reclaim(queues, 80, running, group("a1", "team-a", 40))
    assert [e.gang for e in choice.victims] == ["ml/c-big"]


def test_a_node_level_check_adds_victims_until_the_group_fits() -> None:
    """The aggregate says two gangs are enough; the (fake) planner also wants c2's node."""
    running = tuple(gang(f"c{i}", "team-c", 4, started_at=i) for i in range(6))
    calls: list[frozenset[str]] = []

    def fits(victims: frozenset[str]) -> bool:
        calls.append(victims)
        return "ml/c2" in victims

    no_quota = (gpu_queue("team-a", 0), *A_B_C[1:])  # team-a is owed no quota: team-c keeps its fair share
    choice = reclaim(no_quota, 24, running, group("a1", "team-a", 8), fits=fits)
    assert choice.outcome is ReclaimOutcome.NO_VICTIMS  # team-c may give 8 (fair share 16), c2 is the third
    assert choice.message.endswith(
        "8 GPUs can be taken from queues over their fair share; 4 gang(s) would push their queue below its "
        "fair share; but the node-level check found no victim set that makes room where the group fits"
    )
    choice = reclaim(A_B_C, 24, running, group("a1", "team-a", 8), demand={"team-b": 8}, fits=fits)
    assert choice.outcome is ReclaimOutcome.EVICT  # team-b wants its quota too: team-c's fair share is 8
    assert [e.gang for e in choice.victims] == ["ml/c5", "ml/c2"]  # c4 and c3 spared again
    assert calls[-1] == frozenset({"ml/c5", "ml/c2"})
    # Owed its quota, team-a may take team-c down to its quota (0); the search goes past the fair share,
    # and sparing brings it back: c5 and c2 are enough, and team-c keeps its fair share after all.
    choice = reclaim(A_B_C, 24, running, group("a1", "team-a", 8), fits=fits)
    assert [e.gang for e in choice.victims] == ["ml/c5", "ml/c2"]


def test_a_department_at_its_fair_share_takes_from_inside_only() -> None:
    queues = (
        gpu_queue("org1", 8),
        gpu_queue("t1", 8, parent="org1"),
        gpu_queue("t2", 0, parent="org1"),
        gpu_queue("org2", 8),
        gpu_queue("t3", 0, parent="org2"),
    )
    running = (gang("t2-job", "t2", 4, started_at=0, preemptible=False), gang("t3-job", "t3", 12))
    choice = reclaim(queues, 16, running, group("t1-job", "t1", 8), demand={"t3": 4})
    assert choice.outcome is ReclaimOutcome.NO_VICTIMS
    assert choice.message == (
        "reclaim for ml/t1-job (queue t1): cannot free 8 GPUs: its parent org1 is at its fair share, "
        "so only queues under it can give room; 0 GPUs can be taken from queues over their quota; "
        "1 gang(s) are not preemptible"
    )


# --- property: every choice is irreducible and keeps every queue rule --------------------------------


@st.composite
def reclaim_cases(draw: st.DrawFn) -> tuple[tuple[Queue, ...], int, tuple[RunningGang, ...], PendingGroup]:
    queues = tuple(
        gpu_queue(
            f"q{i}",
            draw(st.integers(0, 16)),
            weight=draw(st.integers(0, 3)),
            min_runtime=draw(st.sampled_from([None, 50])),
        )
        for i in range(draw(st.integers(2, 4)))
    )
    running = tuple(
        gang(
            f"g{j}",
            draw(st.sampled_from([q.name for q in queues[1:]])),
            draw(st.sampled_from([1, 2, 4, 8, 16])),
            priority=draw(st.integers(0, 2)),
            started_at=float(draw(st.integers(0, 100))),
            preemptible=draw(st.booleans()),
        )
        for j in range(draw(st.integers(0, 12)))
    )
    capacity = sum(g.requests.gpus for g in running) + draw(st.integers(0, 8))
    job = group("job", queues[0].name, draw(st.integers(1, 24)))
    return queues, capacity, running, job


@settings(max_examples=400, deadline=None)
@given(reclaim_cases())
def test_reclaim_plans_are_just_enough_and_fair(
    case: tuple[tuple[Queue, ...], int, tuple[RunningGang, ...], PendingGroup],
) -> None:
    queues, capacity, running, job = case
    choice = reclaim(queues, capacity, running, job)
    again = reclaim(queues, capacity, tuple(reversed(running)), job)
    assert choice == again
    if choice.outcome is not ReclaimOutcome.EVICT:
        assert not choice.victims
        return
    tree = QueueTree.build(queues)
    by_key = {g.key: g for g in running}
    victims = [by_key[e.gang] for e in choice.victims]
    free = capacity - sum(g.requests.gpus for g in running)
    need = job.requests.gpus - free
    freed = [v.requests.gpus for v in victims]
    assert sum(freed) >= need
    assert all(sum(freed) - f < need for f in freed), "no victim could have been spared"
    for v in victims:
        assert v.preemptible and v.queue != job.queue
        assert NOW - v.started_at >= tree.min_runtime_seconds(v.queue) or NOW < 50
    held = {q.name: sum(g.requests.gpus for g in running if g.queue == q.name) for q in queues}
    wanted = dict(held)
    wanted[job.queue] += job.requests.gpus
    shares = fair_shares(tree, gpus(capacity), {q: gpus(n) for q, n in wanted.items()})
    assert held[job.queue] + job.requests.gpus <= shares[job.queue].fair_share.gpus
    owed = held[job.queue] < shares[job.queue].deserved.gpus
    for queue in {v.queue for v in victims}:
        left = held[queue] - sum(v.requests.gpus for v in victims if v.queue == queue)
        keeps = shares[queue].deserved if owed else shares[queue].fair_share
        assert left >= keeps.gpus, "a victim keeps its fair share, or its quota when the job is owed one"


def test_cpu_short_reclaims_cpu_and_names_it() -> None:
    queues = (Queue("team-a"), Queue("team-c", cpu=ResourceQuota(0, 0, None)))
    tree = QueueTree.build(queues)
    running = (RunningGang("ml/c1", "team-c", Resources(milli_cpu=6000), started_at=0),)
    job = PendingGroup("ml/a1", "team-a", Resources(milli_cpu=4000))
    capacity = Resources(milli_cpu=8000)
    shares = fair_shares(tree, capacity, {"team-a": job.requests, "team-c": running[0].requests})
    choice = choose_reclaim(
        job,
        tree=tree,
        shares=shares,
        allocated={"team-c": running[0].requests},
        running=running,
        free=Resources(milli_cpu=2000),
        now=NOW,
    )
    assert [e.reason for e in choice.victims] == [
        "reclaim: queue team-c is 6 CPU over its fair share 0; "
        "team-a needs 4 to reach its fair share 4 (group ml/a1)"
    ]


def test_one_pass_for_the_issue_scenario_evicts_each_gang_once() -> None:
    """24 GPUs; C (quota 0, weight 2) fills them with 4-GPU gangs; A and B (quota 8) each submit 8."""
    tree = QueueTree.build(A_B_C)
    running = [gang(f"c{i}", "team-c", 4, started_at=float(i)) for i in range(6)]
    jobs = [group("a1", "team-a", 8), group("b1", "team-b", 8)]
    demand = {"team-a": gpus(8), "team-b": gpus(8), "team-c": gpus(24)}
    shares = fair_shares(tree, gpus(24), demand)
    assert [shares[q].fair_share.gpus for q in ("team-a", "team-b", "team-c")] == [8, 8, 8]
    choices = choose_reclaims(
        jobs, tree=tree, shares=shares, allocated={"team-c": gpus(24)}, running=running, free=gpus(0), now=NOW
    )
    assert [p.outcome for p in choices] == [ReclaimOutcome.EVICT, ReclaimOutcome.EVICT]
    victims = [e.gang for p in choices for e in p.victims]
    assert victims == ["ml/c5", "ml/c4", "ml/c3", "ml/c2"]
    assert choices[1].victims[0].reason == (
        "reclaim: queue team-c is 8 GPUs over its fair share 8; "
        "team-b needs 8 to reach its fair share 8 (group ml/b1)"
    )


def test_a_second_group_of_the_same_queue_counts_the_first() -> None:
    tree = QueueTree.build(A_B_C)
    running = [gang(f"c{i}", "team-c", 4, started_at=float(i)) for i in range(6)]
    jobs = [group("a1", "team-a", 8), group("a2", "team-a", 4)]
    shares = fair_shares(tree, gpus(24), {"team-a": gpus(12), "team-b": gpus(8), "team-c": gpus(24)})
    choices = choose_reclaims(
        jobs, tree=tree, shares=shares, allocated={"team-c": gpus(24)}, running=running, free=gpus(0), now=NOW
    )
    assert shares["team-a"].fair_share.gpus == 11
    assert [p.outcome for p in choices] == [ReclaimOutcome.EVICT, ReclaimOutcome.NOT_STARVED]
    assert choices[1].message.startswith(
        "queue team-a: with ml/a2 it would hold 12 GPUs, over its fair share 11"
    )


@pytest.mark.parametrize("c0_started_at", [0.0, 2.0, 3.0])
def test_a_queue_below_its_quota_takes_a_whole_gang_back_from_a_queue_over_its_quota(
    c0_started_at: float,
) -> None:
    """B's third gang got the room before A's second (the order is decided per pod, on a view that lags).

    B then holds 12 GPUs against a fair share of 10, A 6 against a quota of 8. Taking B's gang would
    leave B below its fair share, which the fair-share rule forbids; A is owed its quota, so it may.
    B and C are both 4 GPUs over their quotas and each would end below its fair share, but B ends 2
    below (10 - 8) and C 4 below (4 - 0): the room comes from the queue furthest over its fair share,
    B, whether C's gang started before, with, or after B's youngest (creation times have a resolution
    of one second, so on a test bed they tie or not by chance).
    """
    running = (
        gang("a-keeper", "team-a", 2, preemptible=False),
        gang("a0", "team-a", 4, started_at=4),
        *(gang(f"b{i}", "team-b", 4, started_at=i) for i in range(3)),
        gang("c0", "team-c", 4, started_at=c0_started_at),
    )
    choice = reclaim(A_B_C, 24, running, group("a1", "team-a", 4))
    assert choice.outcome is ReclaimOutcome.EVICT, choice.message
    assert [e.gang for e in choice.victims] == ["ml/b2"]  # B ends least below its fair share; youngest of B
    assert choice.victims[0].reason == (
        "reclaim: queue team-b is 4 GPUs over its quota 8; "
        "team-a holds 6, below its quota 8, and needs 4 (group ml/a1)"
    )
    # No ping-pong: B (now at its quota, below its fair share of 10) cannot take the gang back.
    after = (*running[:2], gang("a1", "team-a", 4, started_at=10), *running[2:4], running[5])
    back = reclaim(A_B_C, 24, after, group("b2", "team-b", 4))
    assert back.outcome is ReclaimOutcome.NOT_STARVED
    assert back.message.startswith("queue team-b: with ml/b2 it would hold 12 GPUs, over its fair share 10")
