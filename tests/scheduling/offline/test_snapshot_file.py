"""A snapshot file gives back the very cluster it was saved from, and is never taken for a decision."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import msgspec
import orjson
import pytest

from scheduling.admission.queue_hold import AdmittedBook
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.offline.replay import DECISION, SNAPSHOT, ReplayError, load_filter, save_filter, saved_kind
from scheduling.offline.snapshot_file import load_snapshot, save_snapshot
from scheduling.queues import Queue, ResourceQuota
from scheduling.session import FilterInput, SessionSettings, filter_pod
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of
from tests.scheduling.topology.shared_files import document

CACHE = TopologyCache()


def cluster(reverse: bool = False) -> ClusterSnapshot:
    nodes = [
        replace(
            a_node("n1").labels(**{"phalanx.io/rack": "r1"}).build(),
            topology=CACHE.topology(document("a6000-8")),
        ),
        replace(a_node("n2").build(), pin_taint=True, unschedulable=True),
        replace(a_node("n3").build(), ready=False, topology_problem="annotation unreadable"),
    ]
    pods = [
        a_pod("run").gpus(2).queue("a").on("n1", [0, 1]).build(),
        replace(a_pod("pinned").gpus(1).build(), pinned=frozenset({"n2"}), started_at=12.5, priority=7),
        *members("g", 2, 4),
    ]
    groups = [replace(a_gang("g", 2), plan='{"n1": [0]}', phase="Pending", counts=(0, 0, 0, 0))]
    queues = [Queue("a", gpu=ResourceQuota(8, 2, 12), cpu=ResourceQuota(4000)), Queue("b", parent=None)]
    if reverse:
        nodes, pods, groups, queues = nodes[::-1], pods[::-1], groups[::-1], queues[::-1]
    return snapshot_of(nodes, pods, groups, queues)


def assert_same(a: ClusterSnapshot, b: ClusterSnapshot) -> None:
    assert dict(a.nodes) == dict(b.nodes)
    assert [dict(n.labels) for n in a.nodes.values()] == [dict(n.labels) for n in b.nodes.values()]
    assert a.all_pods() == b.all_pods()
    assert [dict(p.labels) for p in a.all_pods()] == [dict(p.labels) for p in b.all_pods()]
    assert a.podgroups() == b.podgroups()
    assert a.queue_list() == b.queue_list()
    assert dict(a.usage) == dict(b.usage)


def test_a_saved_snapshot_loads_as_the_same_cluster() -> None:
    settings = SessionSettings(locality_keys=("rack",), reservation_ttl=30.0)
    data = save_snapshot(cluster(), taken=1234.5, settings=settings)
    loaded = load_snapshot(data, TopologyCache())
    assert_same(loaded.snapshot, cluster())
    assert loaded.snapshot.nodes["n2"].pin_taint
    assert loaded.snapshot.nodes["n1"].topology == cluster().nodes["n1"].topology
    assert (loaded.taken, loaded.settings) == (1234.5, settings)
    assert saved_kind(data) == SNAPSHOT


def test_the_same_cluster_saves_as_the_same_bytes() -> None:
    assert save_snapshot(cluster(), taken=1.0) == save_snapshot(cluster(reverse=True), taken=1.0)
    body = orjson.loads(save_snapshot(cluster(), taken=1.0))
    assert (body["format"], body["kind"]) == (1, "snapshot")
    assert [n["name"] for n in body["cluster"]["nodes"]] == ["n1", "n2", "n3"]


def decision() -> bytes:
    snapshot = cluster()
    pod = snapshot.pod("ml", "w0")
    assert pod is not None
    asked = FilterInput(pod, ("n1", "n2", "n3"), snapshot, PromiseBook(), None, AdmittedBook(), 5.0)
    outcome = filter_pod(asked, topologies=CACHE, settings=SessionSettings())
    return save_filter(asked, outcome, SessionSettings())


def test_snapshots_and_decisions_are_told_apart() -> None:
    saved = decision()
    assert saved_kind(saved) == DECISION
    with pytest.raises(ReplayError, match="saved decision, not a cluster snapshot"):
        load_snapshot(saved, CACHE)
    with pytest.raises(ReplayError, match="cluster snapshot, not a saved decision"):
        load_filter(save_snapshot(cluster(), taken=1.0), CACHE)


def test_a_decision_saved_before_pin_taint_existed_still_loads() -> None:
    body = orjson.loads(decision())
    for node in body["cluster"]["nodes"]:
        del node["pin_taint"]
    asked = load_filter(orjson.dumps(body), CACHE)[0]
    assert not any(n.pin_taint for n in asked.snapshot.nodes.values())


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "not a saved phalanx decision or snapshot"),
        (b"[1, 2]", "format 'list'"),
        (b'{"format": 2, "kind": "snapshot"}', "format 2; this phalanx reads format 1"),
        (b'{"format": 1, "kind": "movie"}', "kind 'movie'"),
        (b'{"format": 1, "kind": "snapshot", "taken": "noon"}', "snapshot is malformed"),
    ],
    ids=["not-json", "not-an-object", "newer-format", "unknown-kind", "malformed"],
)
def test_unreadable_files_are_refused_with_the_reason(body: bytes, error: str) -> None:
    with pytest.raises(ReplayError, match=error):
        load_snapshot(body, CACHE)


def test_read_only_maps_encode_and_nothing_else_unknown_does() -> None:
    with pytest.raises(NotImplementedError):
        save_snapshot(replace(cluster(), queues=MappingProxyType({"x": object()})), taken=0.0)  # type: ignore[dict-item]
    pods = msgspec.json.decode(save_snapshot(cluster(), taken=0.0))["cluster"]["pods"]
    assert [p["labels"] for p in pods if p["name"] == "run"] == [{"phalanx.io/queue": "a"}]
