"""Gangs as the MPI Operator makes them: timeout 0, members one by one, scale-up.

The operator writes ``scheduleTimeoutSeconds: 0`` when the user sets none, creates the PodGroup first
and the members one after another (the launcher last), and raises ``minMember`` with the replicas when
an elastic job grows. Each test here failed on phalanx before its fix.
"""

from __future__ import annotations

import time

import pytest
from localbed import Testbed
from workload import (
    PODGROUPS,
    PodTimeline,
    create_pod,
    create_podgroup,
    events_for,
    get_pod,
    get_podgroup,
    kept_gated,
    list_pods,
    member,
    podgroup,
    wait_for,
)

pytestmark = pytest.mark.both_modes


def _bound(testbed: Testbed, namespace: str) -> set[str]:
    return {p["metadata"]["name"] for p in list_pods(testbed.http, namespace) if p["spec"].get("nodeName")}


def test_a_podgroup_with_schedule_timeout_0_is_accepted_and_its_gang_binds(
    testbed: Testbed, namespace: str
) -> None:
    created = create_podgroup(testbed.http, namespace, podgroup("zero", 2, timeout_seconds=0))
    assert created["spec"]["scheduleTimeoutSeconds"] == 0
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"z{i}", "zero", 1))
    wait_for("both members bound", lambda: _bound(testbed, namespace) == {"z0", "z1"}, timeout=30)


def test_members_created_one_by_one_are_bound_within_seconds_of_the_last(
    testbed: Testbed, namespace: str
) -> None:
    """The members kept gated while the gang waited are released and bound as soon as the last exists."""
    create_podgroup(testbed.http, namespace, podgroup("slow", 3))
    with PodTimeline(testbed.http, namespace) as timeline:
        for name in ("s0", "s1"):
            create_pod(testbed.http, namespace, member(name, "slow", 2))
        kept_gated(testbed.http, namespace, "slow", "waiting for members: 2 of 3", timeout=30)
        assert all(get_pod(testbed.http, namespace, n)["spec"].get("schedulingGates") for n in ("s0", "s1"))
        create_pod(testbed.http, namespace, member("s2", "slow", 2))
        wait_for("all 3 bound", lambda: len(_bound(testbed, namespace)) == 3, timeout=60)
        time.sleep(0.3)
    took = max(timeline.bound_at.values()) - max(timeline.created_at.values())
    print(f"last member created -> all 3 bound: {took:.2f}s")
    assert took < 10, f"the gang waited {took:.1f}s after its last member (a bind round timed out)"


def test_raising_min_member_with_a_new_waiting_member_never_evicts_the_running_gang(
    testbed: Testbed, namespace: str
) -> None:
    """An elastic job grows: minMember follows its replicas, and the new worker cannot be placed yet."""
    create_podgroup(testbed.http, namespace, podgroup("grow", 2))
    for i in range(2):
        create_pod(testbed.http, namespace, member(f"g{i}", "grow", 1))
    wait_for(
        "the gang running",
        lambda: get_podgroup(testbed.http, namespace, "grow").get("status", {}).get("phase") == "Running",
        timeout=60,
    )
    testbed.http.request(
        "PATCH",
        PODGROUPS.format(namespace=namespace) + "/grow",
        body={"spec": {"minMember": 3}},
        content_type="application/merge-patch+json",
    )
    create_pod(testbed.http, namespace, member("g2", "grow", 16))  # no node has 16 GPUs: it waits
    time.sleep(3.0 * 3)  # three times the test bed's stale-gang grace period
    running = _bound(testbed, namespace)
    evictions = [
        e["message"] for e in events_for(testbed.http, namespace, "grow") if e["reason"] == "GangEvicted"
    ]
    assert evictions == [], evictions
    assert running == {"g0", "g1"}, running
