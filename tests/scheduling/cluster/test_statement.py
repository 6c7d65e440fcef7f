from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.room import NodeRoom
from scheduling.cluster.statement import Statement
from scheduling.model import Pod
from scheduling.plan import Assignment, Eviction, Migration, Plan, Resize
from tests.builders import a_node, a_pod, snapshot_of

GiB = 2**30
NODES = [a_node(n).gpus(4).cpu(4000).memory(16 * GiB).build() for n in ("n1", "n2")]


NO_PROMISES = PromiseBook()


def statement_on(*pods: Pod, book: PromiseBook = NO_PROMISES) -> Statement:
    return Statement(snapshot_of([*NODES, a_node("full").gpus(0).build()], pods), book)


def room(statement: Statement, name: str = "n1") -> NodeRoom:
    found = statement.room(name)
    assert found is not None
    return found


def test_assign_then_rollback_restores_the_room() -> None:
    statement = statement_on()
    fresh = room(statement)
    mark = statement.checkpoint()
    statement.assign(a_pod("p").gpus(2).cpu(1000).memory(GiB).build(), "n1", (0, 3))
    taken = room(statement)
    assert (taken.free, taken.left.milli_cpu, taken.left.memory) == (frozenset({1, 2}), 3000, 15 * GiB)
    statement.rollback(mark)
    assert room(statement) == fresh
    assert statement.commit() == Plan()


def test_assign_refuses_gpus_the_node_does_not_have_free() -> None:
    statement = statement_on(a_pod("a").gpus(1).on("n1", [0]).build())
    with pytest.raises(ValueError, match="does not fit node n1"):
        statement.assign(a_pod("p").gpus(1).build(), "n1", (0,))
    assert room(statement).free == frozenset({1, 2, 3})


SHARED_0 = (a_pod("a").gpus(1).on("n1", [0]).build(), a_pod("b").gpus(1).on("n1", [0]).build())
UNINDEXED = a_pod("c").gpus(2).on("n1").build()
CPU_MEM = a_pod("d").cpu(1500).memory(2 * GiB).on("n1").build()
PROMISED_1 = PromiseBook().add(Promise("uid-x", "ml/x", "n1", (1,), 100.0))
HOLDS_1 = a_pod("e").gpus(1).on("n1", [1]).build()

# (running pods, promises, pods evicted, then (free GPU indices, GPU count, cpu, memory) of n1)
EVICT_CASES = {
    "a shared index stays taken while one holder remains": (
        SHARED_0,
        PromiseBook(),
        ["a"],
        ({1, 2, 3}, 3, 4000, 16 * GiB),
    ),
    "a shared index is free once every holder is evicted": (
        SHARED_0,
        PromiseBook(),
        ["a", "b"],
        ({0, 1, 2, 3}, 4, 4000, 16 * GiB),
    ),
    "an evicted pod without indices gives its count back": (
        (UNINDEXED,),
        PromiseBook(),
        ["c"],
        ({0, 1, 2, 3}, 4, 4000, 16 * GiB),
    ),
    "a pod without indices that stays keeps its count": (
        (UNINDEXED, HOLDS_1),
        PromiseBook(),
        ["e"],
        ({0, 1, 2, 3}, 2, 4000, 16 * GiB),
    ),
    "an evicted pod gives CPU and memory back": (
        (CPU_MEM,),
        PromiseBook(),
        ["d"],
        ({0, 1, 2, 3}, 4, 4000, 16 * GiB),
    ),
    "an index promised to another pod stays taken": (
        (HOLDS_1,),
        PROMISED_1,
        ["e"],
        ({0, 2, 3}, 3, 4000, 16 * GiB),
    ),
    "evicting twice frees once": (
        (CPU_MEM,),
        PromiseBook(),
        ["d", "d"],
        ({0, 1, 2, 3}, 4, 4000, 16 * GiB),
    ),
}


@pytest.mark.parametrize(
    ("running", "book", "evicted", "expected"), EVICT_CASES.values(), ids=EVICT_CASES.keys()
)
def test_evict_frees_what_nobody_else_holds(
    running: tuple[Pod, ...],
    book: PromiseBook,
    evicted: list[str],
    expected: tuple[set[int], int, int, int],
) -> None:
    statement = statement_on(*running, book=book)
    by_name = {p.name: p for p in running}
    for name in evicted:
        statement.evict(by_name[name])
    after = room(statement)
    assert (set(after.free), after.count, after.left.milli_cpu, after.left.memory) == expected


def test_a_move_to_a_node_without_room_changes_nothing() -> None:
    pod = a_pod("m").gpus(1).cpu(1000).on("n1", [2]).build()
    statement = statement_on(pod)
    source, target = room(statement), statement.room("full")
    with pytest.raises(ValueError, match="does not fit node full"):
        statement.move(pod, "full", (0,))
    assert room(statement) == source
    assert statement.room("full") == target
    assert statement.commit() == Plan()


def test_a_move_frees_the_source_and_takes_the_target() -> None:
    pod = a_pod("m").gpus(1).cpu(1000).on("n1", [2]).build()
    statement = statement_on(pod)
    statement.move(pod, "n2", (3,))
    assert (room(statement).free, room(statement).left.milli_cpu) == (frozenset({0, 1, 2, 3}), 4000)
    assert (room(statement, "n2").free, room(statement, "n2").left.milli_cpu) == (frozenset({0, 1, 2}), 3000)


def test_commit_returns_the_kept_actions_in_the_order_they_were_taken() -> None:
    running = a_pod("r").gpus(1).on("n1", [0]).build()
    moved = a_pod("m").gpus(1).on("n1", [1]).build()
    statement = statement_on(running, moved)
    statement.evict(running, "reclaim")
    statement.assign(a_pod("p").gpus(1).build(), "n1", (0,), "gang ml/g")
    mark = statement.checkpoint()
    statement.assign(a_pod("q").gpus(1).build(), "n2", (0,))
    statement.rollback(mark)
    statement.move(moved, "n2", (1,), "pack")
    statement.resize("ml/job", 2, 4, "grow")
    plan = statement.commit()
    assert plan.actions == (
        Eviction("ml/r", "uid-ml-r", "n1", "reclaim"),
        Assignment("ml/p", "uid-ml-p", "n1", (0,), "gang ml/g"),
        Migration("ml/m", "uid-ml-m", "n1", "n2", (1,), "pack"),
        Resize("ml/job", 2, 4, "grow"),
    )
    assert [type(a) for a in (*plan.evictions, *plan.assignments, *plan.migrations, *plan.resizes)] == [
        Eviction,
        Assignment,
        Migration,
        Resize,
    ]


RUNNING = [
    a_pod("r0").gpus(2).cpu(1000).on("n1", [0, 1]).build(),
    a_pod("r1").gpus(1).on("n1", [1]).build(),
    a_pod("r2").gpus(1).memory(GiB).on("n2").build(),
    a_pod("r3").gpus(1).on("n2", [3]).build(),
]
PENDING = [
    a_pod("p0").gpus(1).build(),
    a_pod("p1").gpus(2).cpu(2000).build(),
    a_pod("p2").cpu(1500).memory(8 * GiB).build(),
]
PODS = {p.key: p for p in RUNNING + PENDING}

steps = st.lists(
    st.one_of(
        st.tuples(
            st.just("assign"),
            st.sampled_from(PENDING),
            st.sampled_from(["n1", "n2"]),
            st.sets(st.integers(0, 3), max_size=2),
        ),
        st.tuples(st.just("evict"), st.sampled_from(RUNNING)),
        st.tuples(st.just("checkpoint")),
        st.tuples(st.just("rollback")),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_rolled_back_actions_leave_no_trace(script: list[tuple[object, ...]]) -> None:
    statement = statement_on(*RUNNING)
    marks: list[tuple[int, int]] = []
    for step in script:
        if step[0] == "assign":
            _, pod, node, gpus = step
            assert isinstance(pod, Pod) and isinstance(node, str) and isinstance(gpus, set)
            with contextlib.suppress(ValueError):  # a refused assign records nothing
                statement.assign(pod, node, tuple(sorted(gpus)[: pod.requests.gpus]))
        elif step[0] == "evict":
            assert isinstance(step[1], Pod)
            statement.evict(step[1])
        elif step[0] == "checkpoint":
            marks.append(statement.checkpoint())
        elif marks:
            statement.rollback(marks.pop())
    replayed = statement_on(*RUNNING)
    for action in statement.commit().actions:
        if isinstance(action, Assignment):
            replayed.assign(PODS[action.pod], action.node, action.gpus)
        elif isinstance(action, Eviction):
            replayed.evict(PODS[action.pod])
    assert statement.rooms(["n1", "n2"]) == replayed.rooms(["n1", "n2"])
