from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.admission.queue_hold import AdmittedBook
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.gpu.fit import filter_nodes
from scheduling.model import Pod, PodGroup, Resources
from scheduling.preempt_session import narrow_victims
from scheduling.queues import QueueRule, QueueTree
from scheduling.queues.view import view_of
from scheduling.reasons import Code, GroupVerdict, Reason, Rejection, Verdict
from scheduling.session import (
    FilterInput,
    FilterOutcome,
    SessionSettings,
    filter_pod,
    gang_bind_terms,
)
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

NODES = [a_node("n1").build(), a_node("n2").build()]
CANDIDATES = ("n1", "n2")
QUEUES = [gpu_queue("a", quota=4, limit=4)]
BUSY = a_pod("busy").gpus(4).queue("a").on("n2", range(4)).build()  # queue a is at its limit
GANG = [a_pod(f"w{i}").gpus(2).group("g").queue("a").build() for i in range(2)]
ALONE = a_pod("alone").gpus(4).queue("a").build()
HOLD = "queue a: over its GPU limit (limit 4, allocated 4, this job needs 4)"


def reservation(pod: Pod, node: str, gpus: tuple[int, ...], expires_at: float = 100.0) -> Promise:
    return Promise(pod.uid, pod.key, node, gpus, expires_at, pod.requests, pod.group_key)


RESERVED = PromiseBook().add_all([reservation(GANG[0], "n1", (0, 1)), reservation(GANG[1], "n1", (2, 3))])


def decide(
    pod: Pod,
    pods: Sequence[Pod],
    book: PromiseBook,
    *,
    queues: bool = True,
    now: float = 1.0,
    groups: Sequence[PodGroup] = (a_gang("g", 2),),
) -> FilterOutcome:
    snapshot = snapshot_of(NODES, pods, groups, QUEUES if queues else ())
    view = view_of(snapshot, book) if queues else None
    request = FilterInput(pod, CANDIDATES, snapshot, book, view, AdmittedBook(), now)
    return filter_pod(request, topologies=TopologyCache(), settings=SessionSettings())


@pytest.mark.parametrize("pod", [ALONE, GANG[0]], ids=["a pod on its own", "a gang member"])
def test_a_queue_hold_turns_down_every_node_with_the_queue_sentence(pod: Pod) -> None:
    outcome = decide(pod, [BUSY, *GANG, ALONE], PromiseBook())
    assert outcome.feasible == ()
    assert outcome.rejected == {n: Rejection(Code.UNRESOLVABLE, Reason.QUEUE_HOLD, HOLD) for n in CANDIDATES}
    assert outcome.verdict == GroupVerdict(Verdict.QUEUE_HOLD, HOLD)
    assert outcome.admitted is None
    assert outcome.hold is not None and outcome.hold.rule is QueueRule.LIMIT


def test_a_gang_member_holding_its_reservation_skips_the_queue_gate() -> None:
    outcome = decide(GANG[0], [BUSY, *GANG], RESERVED)
    assert outcome.feasible == ("n1",)
    assert outcome.verdict is None or outcome.verdict.verdict is not Verdict.QUEUE_HOLD
    assert outcome.admitted is None
    assert outcome.promises.by_uid == RESERVED.by_uid


LAPSED = PromiseBook().add_all(
    [reservation(GANG[0], "n1", (0, 1), 0.5), reservation(GANG[1], "n1", (2, 3), 0.5)]
)


def test_lapsed_promises_are_dropped_for_a_gang_member() -> None:
    outcome = decide(GANG[0], GANG, LAPSED, queues=False)
    assert outcome.lapsed == tuple(LAPSED.by_uid[p.uid] for p in GANG)
    assert all(p.expires_at > 1.0 for p in outcome.promises.by_uid.values())


def test_a_pod_on_its_own_leaves_the_book_as_it_was() -> None:
    outcome = decide(a_pod("p").gpus(1).build(), GANG, LAPSED, queues=False)
    assert (outcome.lapsed, outcome.promises) == ((), LAPSED)


def test_a_pod_on_its_own_gets_the_fit_answer_and_is_recorded_as_admitted() -> None:
    pod = a_pod("p").gpus(4).queue("a").build()
    busy = a_pod("other").gpus(6).on("n2", range(6)).build()  # default queue: a has room
    outcome = decide(pod, [busy, pod], PromiseBook(), groups=())
    fit = filter_nodes(pod, CANDIDATES, snapshot_of(NODES, [busy, pod]), PromiseBook())
    assert outcome.feasible == ("n1",)
    assert outcome.rejected == fit.rejected
    assert set(outcome.rejected) == {"n2"}
    assert outcome.verdict is None
    assert outcome.admitted is not None and outcome.admitted[0] == "ml/p"


def bound(name: str) -> Pod:
    return a_pod(name).gpus(1).group("g").on("n2", [int(name[-1])]).build()


# (minMember, members already running, scheduleTimeoutSeconds, bind wait) -> (need, wait)
TERMS = {
    "nobody running yet": ((4, 0, 60, 25.0), (4, 25.0)),
    "running members are not waited for": ((4, 3, 60, 25.0), (1, 25.0)),
    "the PodGroup's timeout caps the wait": ((4, 0, 10, 25.0), (4, 10.0)),
    "the bind wait caps a long timeout": ((2, 1, 600, 25.0), (1, 25.0)),
}


@pytest.mark.parametrize(("given", "expected"), TERMS.values(), ids=TERMS.keys())
def test_a_gang_bind_waits_for_the_members_not_yet_running(
    given: tuple[int, int, int, float], expected: tuple[int, float]
) -> None:
    min_member, running, timeout, bind_wait = given
    pod = a_pod("p").gpus(1).group("g").build()
    snapshot = snapshot_of(
        NODES,
        [pod, *(bound(f"r{i}") for i in range(running))],
        [a_gang("g", min_member, timeout=timeout)],
    )
    book = PromiseBook().add(reservation(pod, "n1", (0,)))
    terms = gang_bind_terms(pod, "n1", snapshot, book, bind_wait=bind_wait)
    assert (terms.error, terms.need, terms.wait) == ("", *expected)
    assert terms.promise == book.by_uid[pod.uid]


POD = a_pod("p").gpus(1).group("g").build()
NOT_RESERVED = ("gang ml/g: p has no reservation (it expired); it will be planned again", "no_reservation")
REFUSED = {
    "no promise": ([a_gang("g", 2)], PromiseBook(), "n1", NOT_RESERVED),
    "no PodGroup": ([], PromiseBook().add(reservation(POD, "n1", (0,))), "n1", NOT_RESERVED),
    "a promise made for another gang": (
        [a_gang("g", 2)],
        PromiseBook().add(Promise(POD.uid, POD.key, "n1", (0,), 100.0, Resources(gpus=1), "ml/other")),
        "n1",
        NOT_RESERVED,
    ),
    "a bind to another node than the reserved one": (
        [a_gang("g", 2)],
        PromiseBook().add(reservation(POD, "n1", (0,))),
        "n2",
        ("gang ml/g: p is reserved on n1, not n2", "wrong_node"),
    ),
}


@pytest.mark.parametrize(("groups", "book", "node", "expected"), REFUSED.values(), ids=REFUSED.keys())
def test_a_gang_bind_without_its_reservation_there_fails_with_a_reason(
    groups: list[PodGroup], book: PromiseBook, node: str, expected: tuple[str, str]
) -> None:
    terms = gang_bind_terms(POD, node, snapshot_of(NODES, [POD], groups), book, bind_wait=25.0)
    assert (terms.error, terms.outcome) == expected
    assert (terms.promise, terms.group) == (None, None)


# narrow_victims: an elastic MPIJob (launcher + 6 workers, minMember 5) in queue a at priority 10.
# n1: launcher, w0, w1; n2: w2, w3; n3: w4, w5. A 4-GPU pod of queue a at priority 50 wants room.
ROLE = "training.kubeflow.org/job-role"
JOB_LAYOUT = {"launcher": "n1", "w0": "n1", "w1": "n1", "w2": "n2", "w3": "n2", "w4": "n3", "w5": "n3"}
URGENT = a_pod("urgent").gpus(4).queue("a").priority(50).build()
SPLIT = a_pod("split-0").gpus(2).queue("a").group("split").on("n2").build()


def job_pod(name: str, *, phase: str = "Running", terminating: bool = False) -> Pod:
    builder = a_pod(f"job-{name}").gpus(0 if name == "launcher" else 2).queue("a").priority(10)
    builder = builder.group("job").label(ROLE, "launcher" if name == "launcher" else "worker")
    builder = builder.on(JOB_LAYOUT[name]).phase(phase)
    return builder.terminating().build() if terminating else builder.build()


def uids(*names: str) -> tuple[str, ...]:
    return tuple(f"uid-ml-{n}" for n in names)


@dataclass(frozen=True)
class NarrowCase:
    name: str
    proposed: dict[str, tuple[str, ...]]
    kept: dict[str, tuple[str, ...]]
    changed: dict[str, Pod] = field(default_factory=dict)
    groups: tuple[PodGroup, ...] = (a_gang("job", 5), a_gang("split", 2))
    reason: str | None = None


NARROW_CASES = [
    NarrowCase(
        "two workers above the minimum go alone",
        {"n3": uids("job-w4", "job-w5")},
        {"n3": uids("job-w4", "job-w5")},
        reason="pod ml/job-w4 goes alone: gang ml/job runs 7 members, 2 above its minMember 5",
    ),
    NarrowCase(
        "the launcher never goes alone: its node's members go with it",
        {"n1": uids("job-launcher")},
        {"n1": uids("job-launcher", "job-w0", "job-w1")},
    ),
    NarrowCase(
        "a terminating worker is no longer surplus: two on one node take the gang whole",
        {"n1": uids("job-w0", "job-w1")},
        {"n1": uids("job-launcher", "job-w0", "job-w1")},
        {"w5": job_pod("w5", terminating=True)},
        reason="pod ml/job-launcher on node n1 is added: gang ml/job is evicted whole",
    ),
    NarrowCase(
        "a finished worker is no longer surplus",
        {"n1": uids("job-w0", "job-w1")},
        {"n1": uids("job-launcher", "job-w0", "job-w1")},
        {"w5": job_pod("w5", phase="Succeeded")},
    ),
    NarrowCase(
        "a gang whose PodGroup is not known has no surplus",
        {"n1": uids("job-w0")},
        {"n1": uids("job-launcher", "job-w0", "job-w1")},
        groups=(a_gang("split", 2),),
    ),
    NarrowCase(
        "a node that needs only surplus workers is kept, a node that would evict a gang whole is dropped",
        {"n1": uids("job-w0"), "n2": uids("split-0")},
        {"n1": uids("job-w0")},
        reason="node n2 is dropped: it would evict gang ml/split whole, while node n1 needs only pods on "
        "their own or members above their gang's minimum",
    ),
]


@pytest.mark.parametrize("case", NARROW_CASES, ids=lambda c: c.name)
def test_narrow_victims_takes_surplus_members_alone(case: NarrowCase) -> None:
    job = [case.changed.get(name, job_pod(name)) for name in JOB_LAYOUT]
    split = [SPLIT, a_pod("split-1").gpus(2).queue("a").group("split").on("n3").build()]
    snapshot = snapshot_of([*NODES, a_node("n3").build()], [*job, *split, URGENT], case.groups, QUEUES)
    tree = QueueTree.build(QUEUES)
    proposed = {node: (names, 0) for node, names in case.proposed.items()}
    kept, why = narrow_victims(URGENT, proposed, snapshot, tree, now=1.0)
    assert {node: victims for node, (victims, _) in kept.items()} == case.kept, why
    assert case.reason is None or case.reason in why, why


# A group no node can take holds nothing, so it never counts against its queue's admission.

ROOMY = [gpu_queue("b", quota=8, limit=8)]


@given(
    busy=st.tuples(st.integers(0, 8), st.integers(0, 8)),
    need=st.integers(1, 10),
    gang=st.booleans(),
)
def test_a_group_no_node_takes_is_never_counted_as_admitted(
    busy: tuple[int, int], need: int, gang: bool
) -> None:
    filler = [a_pod(f"busy{i}").gpus(n).on(f"n{i + 1}", range(n)).build() for i, n in enumerate(busy) if n]
    if gang:
        pods = [a_pod(f"w{i}").gpus(need).group("g").queue("b").build() for i in range(2)]
    else:
        pods = [a_pod("p").gpus(need).queue("b").build()]
    snapshot = snapshot_of(NODES, [*filler, *pods], [a_gang("g", 2)], ROOMY)
    view = view_of(snapshot, PromiseBook())
    request = FilterInput(pods[0], CANDIDATES, snapshot, PromiseBook(), view, AdmittedBook(), 1.0)
    outcome = filter_pod(request, topologies=TopologyCache(), settings=SessionSettings(gangs=True))
    assert outcome.feasible or outcome.admitted is None


def test_a_pod_that_fits_nowhere_does_not_hold_its_queue_mate_over_the_limit() -> None:
    filler = [a_pod(f"busy{i}").gpus(4).on(f"n{i}", range(4)).build() for i in (1, 2)]  # 4 free on each
    wide, narrow = a_pod("wide").gpus(6).queue("b").build(), a_pod("narrow").gpus(4).queue("b").build()
    snapshot = snapshot_of(NODES, [*filler, wide, narrow], (), ROOMY)
    view = view_of(snapshot_of(NODES, filler, (), ROOMY), PromiseBook())  # built before they came
    book = AdmittedBook()
    for pod in (wide, narrow):
        request = FilterInput(pod, CANDIDATES, snapshot, PromiseBook(), view, book, 1.0)
        outcome = filter_pod(request, topologies=TopologyCache(), settings=SessionSettings())
        if outcome.admitted is not None:
            book = book.with_group(*outcome.admitted)
    assert outcome.feasible == CANDIDATES, outcome.rejected
