"""``phalanx why``: the core's explanation as JSON, YAML and text, and which objects' events it shows."""

from __future__ import annotations

import json

import pytest
import yaml

from cli.cli_settings import Output
from cli.program import main
from cli.why_command import render_why
from kubeio.event_read import EventInfo
from scheduling.explain import Target, explain
from scheduling.explain.explanation_json import about
from tests.builders import a_gang, a_node, a_pod, members, snapshot_of
from tests.scheduling.queues.builders import gpu_queue

NODES = [a_node(f"n{i}").build() for i in (1, 2, 3)]
P = Target("pod", "ml", "p")
HELD = snapshot_of(
    NODES,
    [
        a_pod("a1").gpus(8).queue("a").on("n1", range(8)).build(),
        a_pod("a2").gpus(4).queue("a").on("n2", range(4)).build(),
        a_pod("p").gpus(4).queue("a").build(),
    ],
    queues=[gpu_queue("a", quota=8, limit=12)],
)
SENTENCE = "queue a: over its GPU limit (limit 12, allocated 12, this job needs 4)"
EVENT = EventInfo(
    "ml",
    "Pod",
    "p",
    "u",
    "Warning",
    "FailedScheduling",
    f"0/3 nodes are available: 3 {SENTENCE}.",
    3,
    "2030-01-01T00:00:00.000000Z",
    "default-scheduler",
)


def test_json_says_the_cause_the_queue_rule_the_nodes_and_the_events() -> None:
    doc = json.loads(render_why(P, explain(HELD, P, now=1.0), [EVENT], Output.JSON))
    assert (doc["kind"], doc["target"], doc["cause"]) == (
        "Explanation",
        {"kind": "pod", "namespace": "ml", "name": "p"},
        "queue_limit",
    )
    assert (doc["queue"]["rule"], doc["queue"]["sentence"], doc["filterMessage"]) == (
        "limit",
        SENTENCE,
        SENTENCE,
    )
    assert doc["queue"]["shares"] == [
        {
            "resource": "nvidia.com/gpu",
            "quota": 8,
            "limit": 12,
            "deserved": 8,
            "fairShare": 12,
            "allocated": 12,
            "requested": 4,
        }
    ]
    assert [(g["reason"], g["count"], g["nodes"]) for g in doc["nodes"]] == [
        ("too_few_free_gpus", 1, ["n1"]),
        ("fits", 2, ["n2", "n3"]),
    ]
    assert doc["events"] == [
        {
            "object": "Pod ml/p",
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": EVENT.message,
            "count": 3,
            "lastSeen": EVENT.last_seen,
            "component": "default-scheduler",
        }
    ]


def test_yaml_says_what_json_says() -> None:
    said = explain(HELD, P, now=1.0)
    assert yaml.safe_load(render_why(P, said, [EVENT], Output.YAML)) == json.loads(
        render_why(P, said, [EVENT], Output.JSON)
    )


def test_the_table_reads_top_down_from_the_verdict() -> None:
    text = render_why(P, explain(HELD, P, now=1.0), [EVENT], Output.TABLE)
    assert text == (
        "pod ml/p: held by its queue's limit\n"
        f"  pod ml/p is held by its queue: {SENTENCE}\n"
        "\n"
        "QUEUE\n"
        "  a: 1st of 1 waiting groups in the fair order (1st of its queue); "
        "with it the queue is over fair share\n"
        "  GPU: quota 8, deserved 8, fair share 12, allocated 12, this group asks 4, limit 12\n"
        f"  rule: limit: {SENTENCE}\n"
        "\n"
        "NODES\n"
        "  COUNT   REASON                                         NODES\n"
        "  1       with too few free GPUs (0 free, pod needs 4)   n1\n"
        "  2       with room for the pod now                      n2, n3\n"
        "\n"
        "EVENTS\n"
        "  LAST SEEN                     OBJECT     TYPE      REASON             MESSAGE\n"
        f"  2030-01-01T00:00:00.000000Z   Pod ml/p   Warning   FailedScheduling   {EVENT.message} (x3)\n"
    )


def test_the_plan_once_a_group_finishes_is_in_the_table() -> None:
    snapshot = snapshot_of(
        NODES,
        [
            a_pod("big1").gpus(8).on("n1", range(8)).build(),
            a_pod("big2").gpus(8).on("n2", range(8)).build(),
            a_pod("mid").gpus(6).on("n3", range(6)).build(),
            a_pod("p").gpus(4).build(),
        ],
    )
    text = render_why(P, explain(snapshot, P, now=1.0), [], Output.TABLE)
    assert "PLAN once ml/mid finishes (6 GPUs)\n  POD   NODE   GPUS\n  p     n3     0,1,2,3\n" in text


def test_a_pods_events_and_its_gangs_a_gangs_and_its_members() -> None:
    snapshot = snapshot_of(NODES, members("g", 2, 1), [a_gang("g", 2)])
    assert about(Target("pod", "ml", "w0"), snapshot) == {("Pod", "w0"), ("PodGroup", "g")}
    assert about(Target("podgroup", "ml", "g"), snapshot) == {("PodGroup", "g"), ("Pod", "w0"), ("Pod", "w1")}


def test_an_unreadable_target_is_a_usage_error_before_any_cluster_is_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--kubeconfig", "/nonexistent", "why", "a/b/c"]) == 2
    assert "cannot read 'a/b/c'" in capsys.readouterr().err
