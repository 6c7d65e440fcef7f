"""The incrementally kept cache must always equal a cache rebuilt from scratch from the same objects."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeio.cluster_cache import ClusterCache
from scheduling.model import Pod, Resources
from scheduling.promises import Promise, PromiseBook
from scheduling.snapshot import total_room


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
