from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.state import ClusterState, state_of
from scheduling.cluster.statement import Statement
from scheduling.model import Node, Pod, Resources
from scheduling.queues import Queue, ResourceQuota
from tests.builders import a_gang, a_node, a_pod, snapshot_content

NODE_NAMES = ("n0", "n1", "n2")
UIDS = ("u0", "u1", "u2", "u3", "u4")


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    node = a_node(draw(st.sampled_from(NODE_NAMES))).gpus(draw(st.integers(0, 4))).cpu(4000)
    condition = draw(st.sampled_from(["ready", "ready", "not ready", "cordoned"]))
    if condition == "not ready":
        node = node.not_ready()
    elif condition == "cordoned":
        node = node.cordoned()
    return node.build()


@st.composite
def pods(draw: st.DrawFn) -> Pod:
    uid = draw(st.sampled_from(UIDS))
    gpus = draw(st.integers(0, 3))
    pod = a_pod(uid).uid(uid).gpus(gpus).cpu(draw(st.sampled_from([0, 500, 1000])))
    group = draw(st.sampled_from([None, "g0", "g1"]))
    if group is not None:
        pod = pod.group(group)
    pod = pod.scheduler(draw(st.sampled_from(["phalanx", "phalanx", "default-scheduler"])))
    queue = draw(st.sampled_from([None, "team-a", "team-b", "nope"]))
    if queue is not None:
        pod = pod.queue(queue)
    if draw(st.booleans()):
        pod = pod.priority(draw(st.sampled_from([-10, 0, 100])))
    node = draw(st.sampled_from([None, *NODE_NAMES]))
    if node is not None:
        indices = draw(st.none() | st.sets(st.integers(0, 3), max_size=3))
        pod = pod.on(node, indices).phase(draw(st.sampled_from(["Running", "Succeeded", "Failed"])))
    elif draw(st.booleans()):
        pod = pod.gated()
    if draw(st.integers(0, 5)) == 0:
        pod = pod.terminating()
    return pod.build()


Event = tuple[str, Any]
events = st.lists(
    st.one_of(
        st.tuples(st.just("put_node"), nodes()),
        st.tuples(st.just("remove_node"), st.sampled_from(NODE_NAMES)),
        st.tuples(st.just("put_pod"), pods()),
        st.tuples(st.just("remove_pod"), st.sampled_from(UIDS)),
    ),
    max_size=40,
)


def feed(state: ClusterState, event: Event, nodes: dict[str, Node], pods: dict[str, Pod]) -> None:
    """Apply ``event`` to ``state`` and to the plain dicts of what exists afterwards."""
    kind, arg = event
    if kind == "put_node":
        state.put_node(arg)
        nodes[arg.name] = arg
    elif kind == "remove_node":
        state.remove_node(arg)
        nodes.pop(arg, None)
    elif kind == "put_pod":
        state.put_pod(arg)
        pods[arg.uid] = arg
    else:
        state.remove_pod(arg)
        pods.pop(arg, None)


def content(snap: ClusterSnapshot) -> dict[str, object]:
    """Everything a decision reads from a snapshot, and its lookups by key and by UID."""
    groups = sorted(set(snap.member_uids) | {"ml/g0", "ml/g1"})
    return {
        **snapshot_content(snap),
        "members": {key: snap.members(key) for key in groups},
        "lookups": {uid: (snap.pod("ml", uid), snap.pod_by_uid(uid)) for uid in UIDS},
    }


def walked(snap: ClusterSnapshot) -> ClusterSnapshot:
    """``snap`` without the queue pods and the sum the state keeps: its methods walk every pod instead."""
    return replace(snap, queue_pods=None, unbound_pods=None, elsewhere=None)


PROMISES = (
    PromiseBook(),
    PromiseBook().add(Promise("uid-x", "ml/x", "n0", (1,), 100.0)),
    PromiseBook().add(Promise("uid-y", "ml/y", "n1", (), 100.0, Resources(milli_cpu=500))),
)


@settings(max_examples=200, deadline=None)
@given(events, st.sampled_from(PROMISES))
def test_the_rooms_kept_per_node_are_the_rooms_a_statement_builds_from_the_usage(
    history: list[Event], promises: PromiseBook
) -> None:
    """Kept rooms are read only where nothing is promised; either way a planner sees the same room."""
    state = ClusterState()
    for event in history:
        feed(state, event, {}, {})
    snap = state.snapshot()
    assert snap.open_rooms is not None
    built = replace(snap, open_rooms=None)
    for name in (*NODE_NAMES, "unknown"):
        assert Statement(snap, promises).room(name) == Statement(built, promises).room(name)


@settings(max_examples=200, deadline=None)
@given(events)
def test_the_queue_pods_and_the_sum_kept_are_what_a_walk_over_every_pod_finds(history: list[Event]) -> None:
    state = ClusterState()
    for event in history:
        feed(state, event, {}, {})
    snap = state.snapshot()
    assert snap.queue_pods is not None
    assert snap.queue_pod_list() == walked(snap).queue_pod_list()
    assert snap.unbound_queue_pods() == walked(snap).unbound_queue_pods()
    assert snap.held_elsewhere() == walked(snap).held_elsewhere()


@settings(max_examples=200, deadline=None)
@given(events)
def test_any_sequence_of_changes_gives_the_snapshot_of_its_final_objects(history: list[Event]) -> None:
    state = ClusterState()
    final_nodes: dict[str, Node] = {}
    final_pods: dict[str, Pod] = {}
    for event in history:
        feed(state, event, final_nodes, final_pods)
    at_once = state_of(final_nodes.values(), final_pods.values()).snapshot()
    assert content(state.snapshot()) == content(at_once)


@settings(max_examples=100, deadline=None)
@given(events, events)
def test_a_snapshot_is_not_changed_by_later_changes(before: list[Event], after: list[Event]) -> None:
    state = ClusterState()
    final_nodes: dict[str, Node] = {}
    final_pods: dict[str, Pod] = {}
    for event in before:
        feed(state, event, final_nodes, final_pods)
    early = state.snapshot()
    then = content(state_of(list(final_nodes.values()), list(final_pods.values())).snapshot())
    for event in after:
        feed(state, event, final_nodes, final_pods)
    assert content(early) == then


QUEUE = Queue("team-a", gpu=ResourceQuota(4, 1))
NODE = a_node("n1").build()
POD = a_pod("p").gpus(1).build()

VERSION_CASES: list[tuple[str, Callable[[ClusterState], object], bool]] = [
    ("a new node", lambda s: s.put_node(a_node("n2").build()), True),
    ("a changed node", lambda s: s.put_node(a_node("n1").gpus(2).build()), True),
    ("a removed node", lambda s: s.remove_node("n1"), True),
    ("a new pod", lambda s: s.put_pod(a_pod("q").build()), True),
    ("a pod bound", lambda s: s.put_pod(a_pod("p").gpus(1).on("n1", [0]).build()), True),
    ("a removed pod", lambda s: s.remove_pod(POD.uid), True),
    ("a new queue", lambda s: s.put_queue(Queue("team-b")), True),
    ("a changed queue", lambda s: s.put_queue(replace(QUEUE, gpu=ResourceQuota(8, 1))), True),
    ("a removed queue", lambda s: s.remove_queue("team-a"), True),
    ("an identical queue", lambda s: s.put_queue(QUEUE), False),
    ("an identical queue list", lambda s: s.replace_queues([QUEUE]), False),
    ("an unknown queue removed", lambda s: s.remove_queue("nope"), False),
    ("a new PodGroup", lambda s: s.put_group(a_gang("g2", 2)), False),
    ("a changed PodGroup", lambda s: s.put_group(a_gang("g", 3)), False),
    ("a removed PodGroup", lambda s: s.remove_group("ml/g"), False),
    ("a PodGroup list", lambda s: s.replace_groups([a_gang("g", 5)]), False),
]


@pytest.mark.parametrize(
    ("change", "bumps"), [c[1:] for c in VERSION_CASES], ids=[c[0] for c in VERSION_CASES]
)
def test_the_version_grows_with_what_the_queue_view_is_built_from(
    change: Callable[[ClusterState], object], bumps: bool
) -> None:
    state = state_of([NODE], [POD], [a_gang("g", 2)], [QUEUE])
    before = state.version
    change(state)
    assert (state.version > before) is bumps
    assert state.snapshot().version == state.version


GROUP_CASES: list[tuple[str, Callable[[ClusterState], object], dict[str, int]]] = [
    ("added", lambda s: s.put_group(a_gang("g2", 3)), {"ml/g": 2, "ml/g2": 3}),
    ("changed", lambda s: s.put_group(a_gang("g", 4)), {"ml/g": 4}),
    ("removed", lambda s: s.remove_group("ml/g"), {}),
    ("listed", lambda s: s.replace_groups([a_gang("h", 1)]), {"ml/h": 1}),
]


@pytest.mark.parametrize(
    ("change", "expected"), [c[1:] for c in GROUP_CASES], ids=[c[0] for c in GROUP_CASES]
)
def test_a_podgroup_change_shows_in_the_next_snapshot(
    change: Callable[[ClusterState], object], expected: dict[str, int]
) -> None:
    state = state_of([NODE], [POD], [a_gang("g", 2)])
    before = state.snapshot()
    change(state)
    after = state.snapshot()
    assert {g.key: g.min_member for g in after.podgroups()} == expected
    assert {g.key: g.min_member for g in before.podgroups()} == {"ml/g": 2}


def test_the_snapshot_is_the_same_object_until_something_changes() -> None:
    state = state_of([NODE], [POD])
    first = state.snapshot()
    assert state.snapshot() is first
    state.put_queue(QUEUE)
    assert state.snapshot() is not first


def test_a_pod_re_created_under_the_same_name_keeps_its_name_when_the_old_one_is_deleted_after() -> None:
    state = ClusterState()
    old = a_pod("p").uid("u-old").build()
    new = a_pod("p").uid("u-new").build()
    state.put_pod(old)
    state.put_pod(new)
    state.remove_pod("u-old")
    assert state.snapshot().pod("ml", "p") == new
