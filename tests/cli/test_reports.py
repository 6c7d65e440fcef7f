"""Reports of ``phalanx queues``, ``gangs``, ``nodes``: rows derived from items, figures from the core."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

from cli.cli_settings import Output
from cli.gangs_command import gang_reason, gangs_report
from cli.nodes_command import nodes_report
from cli.output import render
from cli.queues_command import queues_report
from kubeio.event_read import EventInfo
from kubeio.render import queue_status
from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.gang_table import GangRow
from scheduling.model import Node
from scheduling.queues import Queue, ResourceQuota
from scheduling.queues.view import view_of
from scheduling.topology import TopologyCache
from tests.builders import a_gang, a_node, a_pod, snapshot_of
from tests.scheduling.queues.builders import gpu_queue
from tests.scheduling.topology.shared_files import document

CACHE = TopologyCache()
GOLDEN = Path(__file__).parent / "golden"
MADE = "2030-01-01T00:00:00Z"
T0 = datetime.fromisoformat(MADE).timestamp()


def golden(name: str) -> str:
    """An expected table, kept in a file so that its columns read as they print."""
    return (GOLDEN / name).read_text()


def bridged(name: str) -> Node:
    return replace(a_node(name).build(), topology=CACHE.topology(document("a6000-8")))


def cluster() -> ClusterSnapshot:
    pods = [
        *(
            a_pod(f"run-{i}")
            .gpus(4)
            .group("run")
            .queue("a")
            .created(MADE)
            .on("n1", range(4 * i, 4 * i + 4))
            .build()
            for i in range(2)
        ),
        a_pod("solo").gpus(3).queue("b").created(MADE).on("n2", [0, 1, 2]).build(),
        *(a_pod(f"big-{i}").gpus(8).group("big").queue("b").created(MADE).build() for i in range(2)),
    ]
    queues = [gpu_queue("a", 8, 1, 12), gpu_queue("b", 8), gpu_queue("c", 0, 2)]
    groups = [a_gang("run", 2), a_gang("big", 2)]
    return snapshot_of([bridged(f"n{i}") for i in (1, 2, 3)], pods, groups, queues)


def test_queue_items_match_the_queue_status_the_placement_manager_writes() -> None:
    view = view_of(cluster(), PromiseBook())
    report = queues_report(view)
    by_name = {item["name"]: item for item in report.items}
    for name, item in by_name.items():
        status = queue_status(view, name)["gpu"]
        gpu = item["resources"]["nvidia.com/gpu"]
        assert (gpu["allocated"], gpu["deserved"], gpu["fairShare"], gpu["pending"]) == (
            status["allocated"],
            status["deserved"],
            status["fairShare"],
            status["pending"],
        )
    assert (
        by_name["b"]["status"] == ["below quota, work waiting"] and by_name["b"]["belowQuotaWithWorkWaiting"]
    )
    assert render(report, Output.TABLE) == golden("queues.txt")


def test_a_queue_tree_with_cpu_indents_children_and_adds_a_resource_column() -> None:
    queues = [
        Queue("org", gpu=ResourceQuota(16), cpu=ResourceQuota(8000)),
        Queue("t1", parent="org", gpu=ResourceQuota(8), cpu=ResourceQuota(4000, 1, 6000)),
    ]
    pods = [a_pod("x").gpus(2).cpu(1500).queue("t1").on("n1", [0, 1]).build()]
    view = view_of(snapshot_of([bridged("n1")], pods, [], queues), PromiseBook())
    report = queues_report(view)
    t1 = next(i for i in report.items if i["name"] == "t1")
    assert t1["resources"]["cpu"] == {
        "quota": "4",
        "overQuotaWeight": 1,
        "limit": "6",
        "allocated": "1500m",
        "deserved": "1500m",
        "fairShare": "1500m",
        "pending": "0",
    }
    assert render(report, Output.TABLE) == golden("queues-cpu.txt")


def event(kind: str, name: str, reason: str, at: str, type_: str = "Warning") -> EventInfo:
    return EventInfo("ml", kind, name, "", type_, reason, f"{reason} of {name} at {at}", 1, at, "x")


WAITING = GangRow("ml", "big", "b", "Pending", 2, 0, 2, 30.0, 60)


def test_the_reason_is_the_newest_gang_or_member_event_and_the_podgroups_wins_a_tie() -> None:
    members = ["ml/big-0", "ml/big-1"]
    events = [
        event("Pod", "big-0", "FailedScheduling", "2030-01-01T00:00:05.000000Z"),
        event("PodGroup", "big", "GangWaiting", "2030-01-01T00:00:04.000000Z"),
        event("Pod", "big-1", "FailedScheduling", "2030-01-01T00:00:03.000000Z"),
        event("Pod", "other", "FailedScheduling", "2030-01-01T00:00:09.000000Z"),
        event("PodGroup", "big", "GangReserved", "2030-01-01T00:00:09.000000Z", "Normal"),
        event("Pod", "big-1", "Scheduled", "2030-01-01T00:00:09.000000Z"),
    ]
    reason = gang_reason(WAITING, members, events)
    assert reason is not None and (reason.name, reason.reason) == ("big-0", "FailedScheduling")
    tie = [*events, event("PodGroup", "big", "QueueHold", "2030-01-01T00:00:05.000000Z")]
    reason = gang_reason(WAITING, members, tie)
    assert reason is not None and reason.reason == "QueueHold"
    assert gang_reason(replace(WAITING, bound=2), members, events) is None, "a placed gang has no reason"
    assert gang_reason(WAITING, members, events[3:]) is None


def test_gang_items_and_table() -> None:
    events = [event("PodGroup", "big", "GangWaiting", "2030-01-01T00:00:04.000000Z")]
    report = gangs_report(cluster(), T0 + 200, events, None)
    assert [
        (i["name"], i["phase"], i["bound"], i["minMember"], i["waitingSeconds"]) for i in report.items
    ] == [
        ("big", "Pending", 0, 2, 200),
        ("run", "Running", 2, 2, None),
    ]
    assert report.items[0]["reason"] == {
        "object": "PodGroup ml/big",
        "reason": "GangWaiting",
        "message": "GangWaiting of big at 2030-01-01T00:00:04.000000Z",
        "lastSeen": "2030-01-01T00:00:04.000000Z",
    }
    assert report.items[0]["pastTimeout"] and report.rows[0][6] == "3m20s (past timeout)"
    assert report.rows[1][4:8] == ["2/2", "2", "-", "-"]
    assert gangs_report(cluster(), T0, events, "elsewhere").items == []


def test_node_items_and_table() -> None:
    report = nodes_report(cluster())
    n1, n2, n3 = report.items
    assert n1["holders"] == [
        {"pod": "ml/run-0", "gpus": [0, 1, 2, 3]},
        {"pod": "ml/run-1", "gpus": [4, 5, 6, 7]},
    ]
    assert (n1["gpus"]["free"], n1["freeNvlinkIslands"]) == (0, [])
    assert n2["gpus"] == {
        "total": 8,
        "allocated": 3,
        "free": 5,
        "freeIndices": [3, 4, 5, 6, 7],
        "unindexed": 0,
    }
    assert n2["freeNvlinkIslands"] == [[4, 5], [6, 7], [3]]
    assert n3["freeNvlinkIslands"] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert render(report, Output.TABLE) == golden("nodes.txt")
