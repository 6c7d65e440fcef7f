"""The commands wired to an in-memory API (at phalanx's own boundary): what they read, skip and warn about."""

from __future__ import annotations

import json

import pytest

import cli.gangs_command
import cli.nodes_command
from cli.program import main
from kubeio.cluster_cache import PODGROUPS_PATH
from kubeio.cluster_read import NODES_PATH, PODS_PATH
from kubeio.http import JsonObject
from kubeio.queue_objects import QUEUES_PATH
from tests.kubeio.fake_api import FakeApi
from tests.kubeio.test_cluster_read import raw_group, raw_node, raw_pod


def objects() -> dict[str, list[JsonObject]]:
    broken = raw_pod("broken", node="n1")
    broken["spec"]["containers"] = {}
    return {
        NODES_PATH: [raw_node("n1"), raw_node("n2")],
        PODS_PATH: [raw_pod("w0", node="n1", gpus="0,1", group="g"), raw_pod("w1", group="g"), broken],
        PODGROUPS_PATH: [raw_group("g", 2)],
        QUEUES_PATH: [],
    }


def event(name: str, reason: str, message: str) -> JsonObject:
    return {
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": name},
        "type": "Warning",
        "reason": reason,
        "message": message,
        "lastTimestamp": "2030-01-01T00:00:05Z",
    }


def test_gangs_reads_the_cluster_and_its_events(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served = objects()
    served["/api/v1/namespaces/ml/events"] = [
        event("w1", "FailedScheduling", "0/2 nodes are available: gang")
    ]
    api = FakeApi(served)
    monkeypatch.setattr(cli.gangs_command, "connect", lambda settings: api)
    assert main(["gangs", "-n", "ml", "-o", "json"]) == 0
    out, err = capsys.readouterr()
    [gang] = json.loads(out)["items"]
    assert (gang["name"], gang["bound"], gang["members"]) == ("g", 1, 2)
    assert gang["reason"]["message"] == "0/2 nodes are available: gang"
    assert "warning: Pod ml/broken skipped: spec.containers must be a list" in err
    selectors = [q.get("fieldSelector") for path, q in api.queries if path.endswith("/events")]
    assert selectors == [cli.gangs_command.GANG_EVENTS, cli.gangs_command.MEMBER_EVENTS]


def test_gangs_without_access_to_events_still_shows_the_state(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli.gangs_command, "connect", lambda settings: FakeApi(objects()))
    assert main(["gangs", "-o", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["items"][0]["reason"] is None
    assert "warning: events cannot be listed, so no reasons are shown" in err


def test_nodes_warns_about_a_missing_crd_and_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    served = objects()
    del served[QUEUES_PATH]
    monkeypatch.setattr(cli.nodes_command, "connect", lambda settings: FakeApi(served))
    assert main(["nodes"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].split()[:3] == ["n1", "Ready", "6/8"]
    assert "Queue objects cannot be listed" in err
