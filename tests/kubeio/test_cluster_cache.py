"""The incrementally kept cache must always equal a cache rebuilt from scratch from the same objects."""

from __future__ import annotations

import threading
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeio.cluster_cache import ClusterCache
from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.cluster.snapshot import total_room
from scheduling.model import Pod, Resources
from tests.kubeio.fake_api import FakeApi


def raw_node(name: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def raw_pod(uid: str, node: str | None, gpus: tuple[int, ...], phase: str = "Running") -> dict[str, Any]:
    annotations = {"phalanx.io/gpus": ",".join(map(str, gpus))} if gpus else {}
    return {
        "metadata": {"uid": uid, "namespace": "ml", "name": f"pod-{uid}", "annotations": annotations},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(len(gpus))}}}],
        },
        "status": {"phase": phase},
    }


events = st.lists(
    st.tuples(
        st.sampled_from(["ADDED", "MODIFIED", "DELETED"]),
        st.sampled_from(["u1", "u2", "u3", "u4"]),
        st.sampled_from([None, "n1", "n2"]),
        st.sets(st.integers(0, 7), max_size=3).map(lambda s: tuple(sorted(s))),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(events=events)
def test_incremental_usage_equals_a_fresh_rebuild(
    events: list[tuple[str, str, str | None, tuple[int, ...]]],
) -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1"), raw_node("n2")])
    cache.replace_pods([])
    seen: list[tuple[Pod | None, Pod | None]] = []
    cache.add_listener(lambda old, new: seen.append((old, new)))
    current: dict[str, dict[str, Any]] = {}
    for kind, uid, node, gpus in events:
        raw = raw_pod(uid, node, gpus)
        cache.pod_event(kind, raw)
        if kind == "DELETED":
            current.pop(uid, None)
        else:
            current[uid] = raw
    fresh = ClusterCache()
    fresh.replace_nodes([raw_node("n1"), raw_node("n2")])
    fresh.replace_pods(list(current.values()))
    assert dict(cache.snapshot().usage) == dict(fresh.snapshot().usage)
    assert dict(cache.snapshot().base_free) == dict(fresh.snapshot().base_free)
    assert cache.pods() == fresh.pods()
    assert len(seen) == len(events)
    snapshot = cache.snapshot()
    for book in (PromiseBook(), PROMISES):
        walked = total_room(snapshot.nodes.items(), snapshot.usage, book)
        assert snapshot.room_total is not None
        assert snapshot.free_total(book) == walked, "the running total agrees with a walk over every node"


PROMISES = PromiseBook.of(
    {
        "p1": Promise("p1", "ml/p1", "n1", (6, 7), 1e9, Resources(500, 0, 2)),
        "p2": Promise("p2", "ml/p2", "n2", tuple(range(8)), 1e9, Resources(0, 0, 8)),
    }
)


def test_the_running_total_follows_nodes_that_change_leave_or_stop_being_schedulable() -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1"), raw_node("n2"), raw_node("n3", gpus=4)])
    cache.replace_pods([raw_pod("u1", "n1", (0, 1, 2))])
    cordoned = raw_node("n2")
    cordoned["spec"] = {"unschedulable": True}
    cache.node_event("MODIFIED", cordoned)
    cache.node_event("DELETED", raw_node("n3", gpus=4))
    cache.pod_event("ADDED", raw_pod("u2", "n3", (0,)))  # a pod on a node that is gone counts nowhere
    snapshot = cache.snapshot()
    assert snapshot.free_total(PromiseBook()).gpus == 5
    assert snapshot.free_total(PROMISES).gpus == 3
    assert snapshot.free_total(PROMISES) == total_room(snapshot.nodes.items(), snapshot.usage, PROMISES)


def test_snapshot_is_reused_until_something_changes() -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1")])
    first = cache.snapshot()
    assert cache.snapshot() is first
    cache.pod_event("ADDED", raw_pod("u1", "n1", (0, 1)))
    second = cache.snapshot()
    assert second is not first
    assert second.version > first.version
    assert sorted(second.usage_of("n1").held) == [0, 1]
    assert first.usage_of("n1").held == frozenset(), "an old snapshot never changes"


def test_unreadable_objects_are_skipped_not_fatal() -> None:
    cache = ClusterCache()
    cache.replace_nodes(
        [raw_node("n1"), {"metadata": {"name": "bad"}, "status": {"allocatable": {"cpu": "lots"}}}]
    )
    assert set(cache.snapshot().nodes) == {"n1"}


def raw_queue(name: str, gpu_limit: int | None = None, allocated: int = 0) -> dict[str, Any]:
    gpu: dict[str, Any] = {"quota": 8}
    if gpu_limit is not None:
        gpu["limit"] = gpu_limit
    return {
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"resources": {"nvidia.com/gpu": gpu}},
        "status": {"gpu": {"allocated": allocated}},
    }


def test_queue_listeners_hear_spec_changes_not_status_writes() -> None:
    cache = ClusterCache()
    heard: list[int] = []
    cache.add_queue_listener(lambda: heard.append(cache.version))
    cache.replace_queues([raw_queue("a")])
    cache.queue_event("MODIFIED", raw_queue("a", allocated=4))  # the placement manager's status write
    cache.replace_queues([raw_queue("a", allocated=6)])  # a relist that brings nothing new
    assert len(heard) == 1
    version = cache.version
    cache.queue_event("MODIFIED", raw_queue("a", gpu_limit=12))  # the admin raised a limit
    cache.queue_event("ADDED", raw_queue("b"))
    cache.queue_event("DELETED", raw_queue("b"))
    cache.queue_event("DELETED", raw_queue("b"))  # a repeated delete changes nothing
    assert heard[1:] == [version + 1, version + 2, version + 3]
    assert [q.name for q in cache.queues()] == ["a"]
    assert cache.queues()[0].gpu.limit == 12


def test_node_listeners_hear_a_node_change_its_deletion_and_what_a_relist_changed() -> None:
    cache = ClusterCache()
    heard: list[tuple[str, bool | None, bool | None]] = []
    cache.add_node_listener(
        lambda name, old, new: heard.append(
            (name, None if old is None else old.ready, None if new is None else new.ready)
        )
    )
    assert cache.nodes() is None, "before the first list no node looks deleted"
    cache.replace_nodes([raw_node("n1"), raw_node("n2")])
    not_ready = raw_node("n1")
    not_ready["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    cache.node_event("MODIFIED", not_ready)
    cache.node_event("DELETED", raw_node("n2"))
    cache.replace_nodes([raw_node("n1"), raw_node("n3")])
    assert heard == [
        ("n1", None, True),
        ("n2", None, True),
        ("n1", True, False),
        ("n2", True, None),
        ("n1", False, True),
        ("n3", None, True),
    ]
    nodes = cache.nodes()
    assert nodes is not None
    assert sorted(nodes) == ["n1", "n3"]


def absurd_node(name: str, gpus: str) -> dict[str, Any]:
    node = raw_node(name)
    node["metadata"]["uid"] = f"uid-{name}"
    node["status"]["allocatable"] = {"nvidia.com/gpu": gpus, "cpu": "64"}
    return node


def test_a_node_advertising_absurdly_many_gpus_is_refused_and_costs_nothing_per_gpu() -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1"), absurd_node("big", "4000000")])
    cache.node_event("ADDED", absurd_node("huge", "9223372036854775807"))  # "9999999999999999999Ei" as stored
    snapshot = cache.snapshot()
    for name, count in (("big", 4_000_000), ("huge", 2**63 - 1)):
        node = snapshot.nodes[name]
        assert node.gpu_total == 0 and node.gpu_indices == frozenset(), "no entry per GPU"
        assert node.allocatable.milli_cpu == 64000, "its CPU and memory are still known"
        assert node.gpu_problem == (
            f"node {name} advertises {count} nvidia.com/gpu, more than phalanx models (64 per node); "
            "phalanx places nothing there and counts none of its capacity"
        )
    assert snapshot.free_total(PromiseBook()).gpus == 8, "only n1's GPUs count"
    assert [(r.kind, r.name, r.uid) for r in cache.refusals.all()] == [
        ("Node", "big", "uid-big"),
        ("Node", "huge", "uid-huge"),
    ]
    cache.node_event("MODIFIED", absurd_node("big", "8"))  # fixed: refused no more
    assert cache.snapshot().nodes["big"].gpu_total == 8
    assert [r.name for r in cache.refusals.all()] == ["huge"]
    cache.node_event("DELETED", absurd_node("huge", "9223372036854775807"))
    assert cache.refusals.all() == ()


def test_a_deleted_object_leaves_the_cache_even_when_its_last_state_cannot_be_read() -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1"), raw_node("n2")])
    cache.replace_pods([raw_pod("u1", "n2", (0, 1))])
    cache.replace_podgroups([{"metadata": {"namespace": "ml", "name": "g"}, "spec": {"minMember": 2}}])
    cache.replace_queues([raw_queue("a")])
    unreadable: dict[str, Any] = {"spec": {"containers": "not a list"}, "status": {"allocatable": []}}
    cache.node_event("DELETED", {"metadata": {"name": "n2"}, **unreadable})
    cache.pod_event("DELETED", {"metadata": {"uid": "u1", "namespace": "ml", "name": "pod-u1"}, **unreadable})
    cache.podgroup_event("DELETED", {"metadata": {"namespace": "ml", "name": "g"}, "spec": {"minMember": 0}})
    cache.queue_event("DELETED", {"metadata": {"name": "a"}, "spec": {"resources": []}})
    snapshot = cache.snapshot()
    assert sorted(snapshot.nodes) == ["n1"]
    assert snapshot.all_pods() == [] and snapshot.podgroups() == [] and snapshot.queue_list() == []


def test_an_object_that_turns_unreadable_keeps_its_last_readable_state_and_is_refused() -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1")])
    cache.replace_pods([raw_pod("u1", "n1", (0, 1))])
    broken = raw_pod("u1", "n1", (0, 1))
    broken["spec"]["containers"] = "not a list"
    cache.pod_event("MODIFIED", broken)
    assert sorted(cache.snapshot().usage_of("n1").held) == [0, 1], "its GPUs stay held, not freed"
    cache.replace_pods([broken])  # a relist after a watch expiry: the same
    assert sorted(cache.snapshot().usage_of("n1").held) == [0, 1]
    [refusal] = cache.refusals.all()
    assert (refusal.kind, refusal.key) == ("Pod", "ml/pod-u1")
    assert refusal.reason == "spec.containers must be a list, got str"
    cache.replace_pods([])  # deleted while the watch was down: gone, refusal and all
    assert cache.snapshot().all_pods() == [] and cache.refusals.all() == ()


def test_a_relist_after_a_watch_expiry_forgets_what_was_deleted_meanwhile() -> None:
    cache = ClusterCache()
    cache.replace_nodes([raw_node("n1"), raw_node("n2"), absurd_node("big", "4000000")])
    cache.replace_queues([raw_queue("a", gpu_limit=8), raw_queue("b")])
    cache.replace_nodes([raw_node("n1"), absurd_node("big", "4000000")])
    cache.replace_queues([raw_queue("b")])
    snapshot = cache.snapshot()
    assert sorted(snapshot.nodes) == ["big", "n1"]
    assert [q.name for q in snapshot.queue_list()] == ["b"]
    assert [r.name for r in cache.refusals.all()] == ["big"]


def test_settle_runs_on_the_watch_thread_after_each_change_is_applied() -> None:
    """The extender freezes what a change copied (``kubeio.collector``): it must see the change applied."""
    seen: list[frozenset[str]] = []
    cache = ClusterCache(settle=lambda: seen.append(frozenset(cache.snapshot().pods)))
    api = FakeApi(
        collections={"/api/v1/nodes": [raw_node("n1")], "/api/v1/pods": []},
        streams={"/api/v1/pods": [{"type": "ADDED", "object": raw_pod("u1", "n1", (0,))}]},
    )
    stop = threading.Event()
    cache.start(api, stop)  # type: ignore[arg-type]  # the one fake of the API boundary
    try:
        deadline = time.monotonic() + 60.0  # generous: a loaded machine runs the watch threads late
        while frozenset({"u1"}) not in seen and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.set()
    assert frozenset({"u1"}) in seen  # settled after the event, with the pod in the state
    assert seen.index(frozenset({"u1"})) > 0  # and after the lists before it
