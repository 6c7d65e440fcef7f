"""``phalanx why`` end to end: the CLI's JSON against what the real control plane does.

Each case sets a cluster state up through the shipped configuration (admission gates on: a pod that
cannot start is kept gated by the placement manager's release pass and never reaches kube-scheduler),
asks ``phalanx why`` (the CLI in a subprocess, with the test bed's kubeconfig, as a user runs it), and
checks the answer against the real state: the sentence the release pass put on the pod's (or its
PodGroup's) ``AdmissionWaiting`` event, which ``why`` gives as ``admission``, beside its own explanation
(the extender's filter asked offline); the pods that really hold the GPUs; and, where a running group's
finishing is predicted to make room, the node and GPU indices the pod really gets once that group is
deleted.

Three 8-GPU nodes (``gpu-node-1..3``). Pods are pinned to nodes with ``kubernetes.io/hostname`` node
selectors where the layout matters, so kube-scheduler's bin-packing cannot change the scenario.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    get_pod,
    gpu_pod,
    gpus_of,
    kept_gated,
    member,
    podgroup,
    running,
    said,
    wait_for,
    wait_pod,
)

from kubeio.errors import NotFoundError
from tests.e2e.conftest import why, why_json

pytestmark = pytest.mark.both_modes
"""``why`` reads the release pass's sentences and asks the core offline, which both modes share."""

HOST = "kubernetes.io/hostname"


def pod(
    name: str,
    gpus: int,
    *,
    node: int | None = None,
    queue: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Any:
    body = gpu_pod(name, gpus, node_selector={HOST: f"gpu-node-{node}"} if node else None)
    body["metadata"]["labels"] = {**({"phalanx.io/queue": queue} if queue else {}), **(labels or {})}
    return body


def elsewhere(name: str, node: int, gpus: tuple[int, ...]) -> Any:
    """A pod another scheduler bound itself (``spec.nodeName``), holding ``gpus``: in no phalanx queue."""
    body = gpu_pod(
        name,
        len(gpus),
        scheduler="other-scheduler",
        annotations={"phalanx.io/gpus": ",".join(map(str, gpus))},
    )
    body["spec"]["nodeName"] = f"gpu-node-{node}"
    return body


def running_on(bed: Testbed, namespace: str, name: str) -> tuple[str, tuple[int, ...]]:
    found = wait_pod(bed.http, namespace, name, "bound", lambda p: bool(p["spec"].get("nodeName")))
    return found["spec"]["nodeName"], gpus_of(found)


def said_down(bed: Testbed, namespace: str, name: str, words: str) -> str:
    """The message of the extender's (or kube-scheduler's) ``FailedScheduling`` event for an ungated pod."""
    return wait_for(
        f"{name} turned down ({words})", lambda: said(bed.http, namespace, name, "FailedScheduling", words)
    )


def gated_why(bed: Testbed, namespace: str, name: str, words: str, *args: str) -> tuple[str, dict[str, Any]]:
    """The release pass's sentence for ``name`` kept gated, and ``phalanx why ARGS``, which gives it too."""
    sentence = kept_gated(bed.http, namespace, name, words).removeprefix("kept gated: ")
    answer = why_json(bed, *args)
    assert answer["admission"] == f"kept gated by the placement manager: {sentence}"
    return sentence, answer


def delete(bed: Testbed, namespace: str, name: str) -> None:
    with contextlib.suppress(NotFoundError):
        bed.http.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body={"gracePeriodSeconds": 0}
        )


def node_groups(answer: Mapping[str, Any]) -> list[tuple[int, str, list[str]]]:
    return [(g["count"], g["message"], g["nodes"]) for g in answer["nodes"]]


def plan_of(answer: Mapping[str, Any]) -> dict[str, tuple[str, tuple[int, ...]]]:
    return {p["pod"]: (p["node"], tuple(p["gpus"])) for p in answer["whatIf"]["plan"]}


def fill(bed: Testbed, namespace: str, sizes: Mapping[str, tuple[int, int]]) -> None:
    """Create pods ``name -> (node, gpus)`` and wait until each is bound there."""
    for name, (node, gpus) in sizes.items():
        create_pod(bed.http, namespace, pod(name, gpus, node=node))
    for name, (node, _) in sizes.items():
        assert running_on(bed, namespace, name)[0] == f"gpu-node-{node}"


def test_too_few_gpus_anywhere_names_the_group_whose_end_makes_room_and_the_plan_comes_true(
    testbed: Testbed, namespace: str
) -> None:
    fill(testbed, namespace, {"big1": (1, 8), "big2": (2, 8), "mid": (3, 6)})
    create_pod(testbed.http, namespace, pod("p", 4))
    sentence, answer = gated_why(testbed, namespace, "p", "needs 4 GPUs", f"{namespace}/p")
    assert sentence == "waits for room: needs 4 GPUs, 2 free after 0 group(s) ahead"
    assert answer["cause"] == "no_capacity"
    # No node has 4 GPUs left by count: kube-scheduler would turn them all down itself.
    assert answer["filterMessage"] is None
    assert answer["verdict"] == (
        f"pod {namespace}/p waits for GPUs: it needs 4 GPUs on one node; 2 are free on the 3 nodes it may "
        f"use; it fits once {namespace}/mid finishes (6 GPUs)"
    )
    assert node_groups(answer) == [
        (2, "node(s) with too few free GPUs (0 free, pod needs 4)", ["gpu-node-1", "gpu-node-2"]),
        (1, "node(s) with too few free GPUs (2 free, pod needs 4)", ["gpu-node-3"]),
    ]
    assert answer["whatIf"]["finished"] == [f"{namespace}/mid"]
    predicted = plan_of(answer)["p"]
    delete(testbed, namespace, "mid")
    assert running_on(testbed, namespace, "p") == predicted


def test_fragmentation_enough_gpus_in_all_not_on_one_node(testbed: Testbed, namespace: str) -> None:
    fill(testbed, namespace, {"a": (1, 4), "b": (2, 4), "c": (3, 4)})
    create_pod(testbed.http, namespace, pod("p", 8))
    sentence, answer = gated_why(testbed, namespace, "p", "room on one node", f"{namespace}/p")
    assert sentence == f"waits for room on one node: no node has room for {namespace}/p now (8 GPUs)"
    assert answer["cause"] == "fragmented"
    assert answer["verdict"] == (
        f"pod {namespace}/p waits for room in one place: it needs 8 GPUs on one node; 12 GPUs are free on "
        f"the 3 nodes it may use, but at most 4 on one node; it fits once {namespace}/a finishes (4 GPUs)"
    )
    assert node_groups(answer) == [
        (
            3,
            "node(s) with too few free GPUs (4 free, pod needs 8)",
            ["gpu-node-1", "gpu-node-2", "gpu-node-3"],
        )
    ]
    assert plan_of(answer) == {"p": ("gpu-node-1", (0, 1, 2, 3, 4, 5, 6, 7))}
    delete(testbed, namespace, "a")
    assert running_on(testbed, namespace, "p") == ("gpu-node-1", (0, 1, 2, 3, 4, 5, 6, 7))


def test_a_queue_limit_holds_the_pod_with_the_filters_own_sentence(
    testbed: Testbed, namespace: str, queues: None
) -> None:
    create_pod(testbed.http, namespace, pod("a1", 8, node=1, queue="a"))
    create_pod(testbed.http, namespace, pod("a2", 4, node=2, queue="a"))
    running_on(testbed, namespace, "a1")
    running_on(testbed, namespace, "a2")
    create_pod(testbed.http, namespace, pod("p", 4, queue="a"))
    event, answer = gated_why(testbed, namespace, "p", "allocated 12", f"{namespace}/p")
    sentence = "queue a: over its GPU limit (limit 12, allocated 12, this job needs 4)"
    assert event == sentence  # the release pass says what the extender's filter says
    assert answer["cause"] == "queue_limit"
    assert answer["verdict"] == f"pod {namespace}/p is held by its queue: {sentence}"
    queue = answer["queue"]
    assert (queue["name"], queue["rule"], queue["sentence"]) == ("a", "limit", sentence)
    gpu = next(s for s in queue["shares"] if s["resource"] == "nvidia.com/gpu")
    assert (gpu["quota"], gpu["limit"], gpu["allocated"], gpu["requested"]) == (8, 12, 12, 4)
    assert any(e["reason"] == "AdmissionWaiting" and sentence in e["message"] for e in answer["events"])


def test_a_non_preemptible_pod_over_its_queues_quota_is_held(
    testbed: Testbed, namespace: str, queues: None
) -> None:
    keep = {"phalanx.io/preemptible": "false"}
    create_pod(testbed.http, namespace, pod("np", 8, node=1, queue="b", labels=keep))
    running_on(testbed, namespace, "np")
    create_pod(testbed.http, namespace, pod("p", 4, queue="b", labels=keep))
    event, answer = gated_why(testbed, namespace, "p", "non-preemptible", f"{namespace}/p")
    sentence = (
        "queue b: non-preemptible jobs run only within the queue's quota "
        "(GPU quota 8, 8 held by non-preemptible jobs, this job needs 4)"
    )
    assert event == sentence
    assert answer["cause"] == "non_preemptible_quota"
    assert (answer["queue"]["rule"], answer["queue"]["sentence"]) == ("non_preemptible_quota", sentence)
    # The queue rule, not room, holds it: two nodes have room for it.
    assert node_groups(answer)[-1] == (2, "node(s) with room for the pod now", ["gpu-node-2", "gpu-node-3"])


@pytest.mark.extender_only("the extender's hold for a group ahead, on pods created ungated")
def test_a_group_ahead_in_the_fair_order_keeps_its_room_and_is_named(
    testbed: Testbed, namespace: str, queues: None, ungated: None
) -> None:
    """A younger pod does not take the room a group ahead in its queue waits for.

    Gang ``first`` of queue a (2 x 5 GPUs) fits the 12 free GPUs in all but not the nodes (0, 4, 8 free),
    so it waits at the head of queue a; ``p`` (4 GPUs, queue a, younger) would fit node 2 or 3.

    Ungated (``ungated``): this is the extender's hold for a group ahead that kube-scheduler is trying.
    With gates on, ``first`` would be kept gated, not tried, and ``p`` released: the release pass holds
    room for a group ahead only once it has waited ``--gate-starve-after-seconds`` (5 minutes), a rule
    of the core's (tests/scheduling/admission/test_release.py).
    """
    create_pod(testbed.http, namespace, elsewhere("x1", 1, (0, 1, 2, 3, 4, 5, 6, 7)))  # in no queue
    create_pod(testbed.http, namespace, elsewhere("x2", 2, (0, 1, 2, 3)))
    create_podgroup(testbed.http, namespace, podgroup("first", 2))
    for i in range(2):
        body = member(f"first-{i}", "first", 5)
        body["metadata"]["labels"]["phalanx.io/queue"] = "a"
        create_pod(testbed.http, namespace, body)
    said_down(testbed, namespace, "first-0", "needs 10 GPUs")
    # The extender rebuilds its queue view once a second; a group it does not list yet holds no room, so
    # p must come after the view lists first (the line is kept by the view, not by creation time).
    time.sleep(3)
    create_pod(testbed.http, namespace, pod("p", 4, queue="a"))
    event = said_down(testbed, namespace, "p", "ahead of this one")
    answer = why_json(testbed, f"{namespace}/p")
    sentence = (
        f"queue a: the 12 GPUs free are needed by 1 group(s) ahead of this one ({namespace}/first of queue a "
        "need 10); this job needs 4"
    )
    assert sentence in event
    assert answer["cause"] == "held_for_ahead"
    assert answer["verdict"] == f"pod {namespace}/p is held by its queue: {sentence}"
    queue = answer["queue"]
    assert (queue["position"], queue["pending"], queue["ahead"], queue["holders"]) == (
        2,
        2,
        [f"{namespace}/first"],
        [f"{namespace}/first"],
    )
    assert all(
        get_pod(testbed.http, namespace, f"first-{i}")["spec"].get("nodeName") is None for i in range(2)
    )


def test_an_incomplete_gang_says_how_many_members_exist(testbed: Testbed, namespace: str) -> None:
    create_podgroup(testbed.http, namespace, podgroup("g", 3))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"g-{i}", "g", 2))

    event, answer = gated_why(testbed, namespace, "g", "2 of 3", "podgroup/g", "-n", namespace)
    assert event == f"gang {namespace}/g: waiting for members: 2 of 3 pods exist"
    assert answer["cause"] == "gang_incomplete"
    assert answer["verdict"] == f"gang {namespace}/g waits for members: 2 of 3 pods exist (minMember 3)"
    assert answer["gang"] == {"minMember": 3, "present": 2, "bound": 0, "waiting": 2, "podGroup": True}
    assert answer["filterMessage"] == event
    assert any(
        e["object"] == f"PodGroup {namespace}/g" and e["reason"] == "AdmissionWaiting"
        for e in answer["events"]
    )


@contextlib.contextmanager
def tainted(bed: Testbed, node: str, taint: Mapping[str, str]) -> Iterator[None]:
    path = f"/api/v1/nodes/{node}"
    before = bed.http.request("GET", path)["spec"].get("taints")
    patch = "application/merge-patch+json"
    bed.http.request(
        "PATCH", path, body={"spec": {"taints": [*(before or []), dict(taint)]}}, content_type=patch
    )
    try:
        yield
    finally:
        bed.http.request("PATCH", path, body={"spec": {"taints": before}}, content_type=patch)


def test_a_taint_and_a_node_selector_that_exclude_the_node_with_room(
    testbed: Testbed, namespace: str
) -> None:
    with tainted(testbed, "gpu-node-1", {"key": "gpu", "value": "reserved", "effect": "NoSchedule"}):
        # Tainted before the fill: the seconds the fill takes let the placement manager's cache see the
        # taint before p is created, or its door could let p in on a node view without it.
        fill(testbed, namespace, {"f2": (2, 8), "f3": (3, 8)})
        create_pod(testbed.http, namespace, pod("p", 4))
        create_pod(testbed.http, namespace, pod("q", 4, node=2))
        for name, args in (("p", (f"{namespace}/p",)), ("q", ("q", "-n", namespace))):
            event, _ = gated_why(testbed, namespace, name, "room on one node", *args)
            assert (
                event == f"waits for room on one node: no node has room for {namespace}/{name} now (4 GPUs)"
            )
        p, q = why_json(testbed, f"{namespace}/p"), why_json(testbed, "q", "-n", namespace)
        taint = "node(s) with taint gpu=reserved:NoSchedule the pod does not tolerate"
        assert p["cause"] == q["cause"] == "excluded"
        assert node_groups(p) == [
            (2, "node(s) with too few free GPUs (0 free, pod needs 4)", ["gpu-node-2", "gpu-node-3"]),
            (1, taint, ["gpu-node-1"]),
        ]
        assert p["verdict"] == (
            f"pod {namespace}/p waits: the nodes with room for it are excluded by kube-scheduler's filters "
            "(1 node with taint gpu=reserved:NoSchedule the pod does not tolerate)"
        )
        assert node_groups(q) == [  # one node each, by sentence
            (
                1,
                "node(s) not matching the pod's node selector kubernetes.io/hostname=gpu-node-2",
                ["gpu-node-3"],
            ),
            (1, taint, ["gpu-node-1"]),
            (1, "node(s) with too few free GPUs (0 free, pod needs 4)", ["gpu-node-2"]),
        ]
    assert running_on(testbed, namespace, "p")[0] == "gpu-node-1"  # the taint gone, it goes there


def test_a_bound_pod_a_pod_of_another_scheduler_and_an_unknown_pod(testbed: Testbed, namespace: str) -> None:
    create_pod(testbed.http, namespace, pod("p", 2))
    node, gpus = running_on(testbed, namespace, "p")
    wait_pod(testbed.http, namespace, "p", "running", running)
    create_pod(testbed.http, namespace, gpu_pod("other", 1, scheduler="default-scheduler"))
    bound = why_json(testbed, f"{namespace}/p")
    assert bound["cause"] == "bound"
    assert bound["bound"] == [{"pod": "p", "node": node, "gpus": list(gpus)}]
    assert bound["verdict"] == (
        f"pod {namespace}/p is bound to node {node} with GPUs {','.join(map(str, gpus))} (phase Running)"
    )
    other = why_json(testbed, f"{namespace}/other")
    assert other["cause"] == "not_phalanx"
    assert "its spec.schedulerName is default-scheduler" in other["verdict"]
    missing = why(testbed, f"{namespace}/ghost")
    print(f"exit {missing.returncode}: {missing.stderr}")
    assert missing.returncode == 1
    assert f"pod {namespace}/ghost not found" in missing.stderr
    assert missing.stdout == ""
