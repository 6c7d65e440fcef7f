"""Gang scheduling end to end: all-or-nothing through an unmodified kube-scheduler (3 nodes x 8 GPUs)."""

from __future__ import annotations

import random
import time

import pytest
from localbed import Testbed
from workload import (
    PodTimeline,
    create_pod,
    create_podgroup,
    double_booked,
    events_for,
    get_podgroup,
    gpu_pod,
    kept_gated,
    list_pods,
    member,
    podgroup,
    said,
    wait_for,
)

from tests.e2e.test_single_pod import metric

pytestmark = pytest.mark.both_modes
"""Run with phalanx as the extender and as the framework sidecar (``tests/e2e/conftest.py``)."""

FINISH = {"phalanx.io/sim-duration-seconds": "2"}


def bound_names(testbed: Testbed, namespace: str, prefix: str = "") -> set[str]:
    pods = list_pods(testbed.http, namespace)
    return {
        p["metadata"]["name"]
        for p in pods
        if p["spec"].get("nodeName") and p["metadata"]["name"].startswith(prefix)
    }


def test_a_launcher_and_16_workers_are_bound_together(testbed: Testbed, namespace: str) -> None:
    create_podgroup(testbed.http, namespace, podgroup("llama", 17))
    with PodTimeline(testbed.http, namespace) as timeline:
        create_pod(testbed.http, namespace, member("launcher", "llama", 0))
        for i in range(16):
            create_pod(testbed.http, namespace, member(f"worker-{i}", "llama", 1))
        wait_for("all 17 members bound", lambda: len(bound_names(testbed, namespace)) == 17, timeout=90)
        time.sleep(0.5)
    last_created = max(timeline.created_at.values())
    first_bound, last_bound = min(timeline.bound_at.values()), max(timeline.bound_at.values())
    assert len(timeline.bound_at) == 17
    assert first_bound >= last_created, "a member was bound before the last one existed"
    assert last_bound - first_bound < 2.0, f"members were bound {last_bound - first_bound:.2f}s apart"
    nodes = {p["spec"]["nodeName"] for p in list_pods(testbed.http, namespace)}
    assert len(nodes) == 2, f"16 one-GPU workers fit on 2 of the 8-GPU nodes, got {sorted(nodes)}"
    assert double_booked(list_pods(testbed.http)) == []


def _race(testbed: Testbed, namespace: str, round_: int, rng: random.Random) -> float:
    """Two gangs of 2 x 8 GPUs (16 of 24) created interleaved: one runs whole, the other waits whole."""
    a, b = f"a{round_}", f"b{round_}"
    create_podgroup(testbed.http, namespace, podgroup(a, 2))
    create_podgroup(testbed.http, namespace, podgroup(b, 2))
    order = [(a, 0), (a, 1), (b, 0), (b, 1)]
    rng.shuffle(order)
    start = time.monotonic()
    for group, i in order:
        create_pod(testbed.http, namespace, member(f"{group}-{i}", group, 8, annotations=FINISH))
    half_since: dict[str, float] = {}
    partial: list[str] = []

    def one_gang_whole() -> str | None:
        """Which gang is whole; a gang half-bound for over a second (not a release in flight) is noted."""
        bound = bound_names(testbed, namespace, a) | bound_names(testbed, namespace, b)
        now = time.monotonic()
        for g in (a, b):
            if len({n for n in bound if n.startswith(f"{g}-")}) == 1:
                if now - half_since.setdefault(g, now) > 1.0:
                    partial.append(g)
            else:
                half_since.pop(g, None)
        whole = [g for g in (a, b) if {f"{g}-0", f"{g}-1"} <= bound]
        return whole[0] if whole else None

    first = wait_for(f"round {round_}: one gang bound", one_gang_whole, timeout=60, interval=0.05)
    other = b if first == a else a
    assert not bound_names(testbed, namespace, f"{other}-"), (
        f"round {round_}: {other} bound while {first} ran"
    )

    def second_whole() -> bool:
        return one_gang_whole() is not None and len(bound_names(testbed, namespace, f"{other}-")) == 2

    wait_for(
        f"round {round_}: the second gang bound after the first finished",
        second_whole,
        timeout=90,
        interval=0.05,
    )
    took = time.monotonic() - start
    assert partial == [], f"round {round_}: a gang was seen half-bound: {partial}"
    wait_for(
        "both gangs finished",
        lambda: all(p["status"].get("phase") == "Succeeded" for p in list_pods(testbed.http, namespace)),
        timeout=60,
    )
    return took


def test_two_gangs_that_each_need_two_thirds_never_deadlock(
    testbed: Testbed, namespace: str, phalanx_mode: str
) -> None:
    """Ten random interleavings of the two gangs' creations per mode, other ones in each mode."""
    rng = random.Random(f"deadlock-{phalanx_mode}")
    rounds = [_race(testbed, namespace, round_, rng) for round_ in range(10)]
    spread = f"{min(rounds):.1f}..{max(rounds):.1f}s (mean {sum(rounds) / len(rounds):.1f}s)"
    print(f"10 interleavings: both gangs ran one after the other in {spread}")
    assert double_booked(list_pods(testbed.http)) == []


def test_a_gang_larger_than_the_cluster_binds_nothing_and_says_why(testbed: Testbed, namespace: str) -> None:
    create_podgroup(testbed.http, namespace, podgroup("huge", 4))
    for i in range(4):
        create_pod(testbed.http, namespace, member(f"huge-{i}", "huge", 8))

    # Kept gated whole by the release pass, its sentence on the PodGroup: kube-scheduler never tries it.
    message = kept_gated(testbed.http, namespace, "huge", "needs 32 GPUs")
    assert message == (
        "kept gated: can never be placed on this cluster as it is: it needs 32 GPUs; the schedulable nodes "
        "offer 24 in all"
    )
    time.sleep(2)
    assert bound_names(testbed, namespace) == set()


def test_a_gang_binds_nothing_until_min_member_pods_exist(testbed: Testbed, namespace: str) -> None:
    create_podgroup(testbed.http, namespace, podgroup("eight", 8))
    for i in range(6):
        create_pod(testbed.http, namespace, member(f"m{i}", "eight", 1))

    def waiting() -> str | None:
        # Whichever member kube-scheduler tries last says it; the PodGroup's own event says it too.
        for name in ("eight", *(f"m{i}" for i in range(6))):
            for event in events_for(testbed.http, namespace, name):
                if "waiting for members: 6 of 8" in event["message"]:
                    return str(event["message"])
        return None

    wait_for("members to say they wait for 2 more", waiting)
    time.sleep(2)
    assert bound_names(testbed, namespace) == set()
    for i in (6, 7):
        create_pod(testbed.http, namespace, member(f"m{i}", "eight", 1))
    wait_for("all 8 bound", lambda: len(bound_names(testbed, namespace)) == 8, timeout=60)


@pytest.mark.extender_only("the extender's reservation of a gang created ungated")
def test_a_gang_created_member_by_member_is_reserved_whole_at_its_first(
    testbed: Testbed, namespace: str, ungated: None
) -> None:
    """Members created seconds apart each take the place kept for them; none is turned down for waiting.

    Ungated (``ungated``): with the admission gates on, the release pass lets a gang reach kube-scheduler
    only whole. Where the gates are off, kube-scheduler tries each member as it is created, and the
    extender plans the whole gang at the first, the missing members as stand-ins.
    """
    create_podgroup(testbed.http, namespace, podgroup("four", 4))
    with PodTimeline(testbed.http, namespace) as timeline:
        create_pod(testbed.http, namespace, member("f0", "four", 2))
        reserved = wait_for(
            "the gang reserved whole at its first member",
            lambda: said(testbed.http, namespace, "four", "GangReserved", "3 not created yet"),
        )
        assert reserved.startswith(f"gang {namespace}/four: 1 pod and 3 not created yet reserved on")
        for i in (1, 2, 3):
            time.sleep(2)  # the first member waits at the bind barrier meanwhile
            create_pod(testbed.http, namespace, member(f"f{i}", "four", 2))
        wait_for("all 4 bound", lambda: len(bound_names(testbed, namespace, "f")) == 4, timeout=60)
    first_bound = min(timeline.bound_at.values())
    assert first_bound >= timeline.created_at["f3"], "no member bound before the gang was whole"
    turned_down = [
        e["message"]
        for i in range(4)
        for e in events_for(testbed.http, namespace, f"f{i}")
        if e["reason"] == "FailedScheduling"
    ]
    assert turned_down == []
    assert double_booked(list_pods(testbed.http)) == []


@pytest.mark.extender_only("the extender's nominations and its single-node filter path")
def test_members_created_after_the_reservation_are_nominated_to_their_place_and_tried_there_alone(
    testbed: Testbed, namespace: str, ungated: None
) -> None:
    """kube-scheduler tries a nominated member on its node alone: the extender is asked about one name.

    Ungated (``ungated``), so that the gang is reserved at its first member with three places kept. The
    later members carry a gate of their own: kube-scheduler leaves them alone until it is removed, so
    the extender's nominations are there before kube-scheduler tries them (on a busy scheduler, a queue
    of members does the same).
    """
    hold = "example.com/hold"
    create_podgroup(testbed.http, namespace, podgroup("nom", 4))
    create_pod(testbed.http, namespace, member("n0", "nom", 2))
    wait_for(
        "the gang reserved whole at its first member",
        lambda: said(testbed.http, namespace, "nom", "GangReserved", "3 not created yet"),
    )
    for i in (1, 2, 3):
        pod = member(f"n{i}", "nom", 2)
        pod["spec"]["schedulingGates"] = [{"name": hold}]
        create_pod(testbed.http, namespace, pod)

    def nominated() -> dict[str, str] | None:
        pods = {p["metadata"]["name"]: p for p in list_pods(testbed.http, namespace)}
        nodes = {n: str(pods[n]["status"].get("nominatedNodeName") or "") for n in ("n1", "n2", "n3")}
        return nodes if all(nodes.values()) else None

    nodes = wait_for("the three late members nominated", nominated, timeout=30)
    single = metric(testbed, "phalanx_extender_filter_answers_total", path="single")
    for i in (1, 2, 3):
        testbed.http.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/n{i}",
            body={"spec": {"schedulingGates": []}},
            content_type="application/merge-patch+json",
        )
    wait_for("all 4 bound", lambda: len(bound_names(testbed, namespace, "n")) == 4, timeout=60)
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in list_pods(testbed.http, namespace)}
    assert {n: placed[n] for n in nodes} == nodes, "each late member bound where it was nominated"
    asked_alone = metric(testbed, "phalanx_extender_filter_answers_total", path="single") - single
    assert asked_alone >= 3, f"the extender was asked about one node for each: {asked_alone} times"
    assert double_booked(list_pods(testbed.http)) == []


def test_a_pod_without_a_group_still_schedules_around_a_reservation(testbed: Testbed, namespace: str) -> None:
    create_pod(testbed.http, namespace, gpu_pod("alone", 2))
    wait_for("the lone pod bound", lambda: "alone" in bound_names(testbed, namespace))


def test_a_gang_that_loses_a_member_is_evicted_whole_with_a_reason(testbed: Testbed, namespace: str) -> None:
    create_podgroup(testbed.http, namespace, podgroup("trio", 3))
    for i in range(3):
        create_pod(testbed.http, namespace, member(f"t{i}", "trio", 1))
    wait_for(
        "the gang running and its status saying so",
        lambda: get_podgroup(testbed.http, namespace, "trio").get("status", {}).get("phase") == "Running",
        timeout=60,
    )
    testbed.http.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/t1", body={"gracePeriodSeconds": 0})
    wait_for("the survivors evicted", lambda: not list_pods(testbed.http, namespace), timeout=30)

    def evicted() -> str | None:
        for event in events_for(testbed.http, namespace, "trio"):
            if event["reason"] == "GangEvicted":
                return str(event["message"])
        return None

    message = wait_for("a GangEvicted event on the PodGroup", evicted, timeout=15)
    assert message.startswith(f"gang {namespace}/trio: only 2 of 3 members running (1 lost)")
