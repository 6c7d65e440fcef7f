"""Crash safety: SIGKILL the extender while a gang is half-bound; the restarted one finishes the job."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from functools import partial

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    double_booked,
    events_for,
    get_pod,
    get_podgroup,
    gpu_pod,
    gpus_of,
    list_pods,
    member,
    podgroup,
    running,
    wait_for,
    wait_pod,
)

from scheduling.gang.record import encode_plan
from scheduling.plan import Assignment


@pytest.fixture
def slow_binding_extender(testbed: Testbed) -> Iterator[None]:
    """The extender with a gang's Bindings spread 1 s apart, so a kill lands mid-bind; restored after."""
    testbed.kill_extender(signal.SIGTERM)
    testbed.start_extender({"PHALANX_GANG_BIND_DELAY_SECONDS": "1"})
    yield
    testbed.kill_extender(signal.SIGTERM)
    testbed.start_extender()


def plan_removed(testbed: Testbed, namespace: str, group: str) -> bool:
    """Whether the PodGroup ``group`` no longer carries a bind plan (bound, completed or rolled back)."""
    annotations = get_podgroup(testbed.http, namespace, group)["metadata"].get("annotations") or {}
    return "phalanx.io/gang-plan" not in annotations


def members_state(testbed: Testbed, namespace: str) -> tuple[int, int]:
    pods = [p for p in list_pods(testbed.http, namespace) if not p["metadata"].get("deletionTimestamp")]
    return len(pods), sum(1 for p in pods if p["spec"].get("nodeName"))


def test_a_gang_killed_mid_bind_is_completed_or_rolled_back_within_30s(
    testbed: Testbed, namespace: str, slow_binding_extender: None
) -> None:
    create_podgroup(testbed.http, namespace, podgroup("crash", 4))
    for i in range(4):
        create_pod(testbed.http, namespace, member(f"c{i}", "crash", 2))
    wait_for(
        "the gang half-bound", lambda: 0 < members_state(testbed, namespace)[1] < 4, timeout=60, interval=0.05
    )
    testbed.kill_extender(signal.SIGKILL)
    _, bound_at_kill = members_state(testbed, namespace)
    assert 0 < bound_at_kill < 4
    testbed.start_extender()

    def settled() -> tuple[int, int] | None:
        existing, bound = members_state(testbed, namespace)
        return (existing, bound) if bound in (0, existing) and bound in (0, 4) else None

    existing, bound = wait_for("the gang fully bound or fully unbound", settled, timeout=30, interval=0.2)
    print(f"killed with {bound_at_kill} of 4 members bound; after restart: {bound} of {existing} bound")
    assert double_booked(list_pods(testbed.http)) == []
    wait_for("the plan annotation removed", partial(plan_removed, testbed, namespace, "crash"), timeout=15)


def phases(testbed: Testbed, namespace: str, group: str) -> dict[str, tuple[str | None, str]]:
    """Member name -> (node, phase), for the live and the finished members of ``group``."""
    return {
        p["metadata"]["name"]: (p["spec"].get("nodeName"), p.get("status", {}).get("phase", "Pending"))
        for p in list_pods(testbed.http, namespace)
        if p["metadata"].get("labels", {}).get("scheduling.x-k8s.io/pod-group") == group
    }


@pytest.mark.parametrize("round_", range(3))
def test_a_member_that_finished_before_recovery_counts_as_bound_and_the_gang_completes(
    testbed: Testbed, namespace: str, slow_binding_extender: None, round_: int
) -> None:
    """A kill mid-bind, and a bound member that finishes before the restarted extender looks.

    A chaos run with the binds 1 s apart, so the kill lands between them. The extender's cache lists live
    pods only: before, recovery counted the finished member as gone, rolled the gang back, and the members
    left unbound waited for ever with "3 of 4 pods exist".
    """
    group = f"fin{round_}"
    create_podgroup(testbed.http, namespace, podgroup(group, 4))
    for i in range(4):
        annotations = {"phalanx.io/sim-duration-seconds": "1"}
        create_pod(testbed.http, namespace, member(f"{group}-{i}", group, 1, annotations=annotations))
    wait_for(
        "the gang half-bound",
        lambda: 0 < sum(1 for node, _ in phases(testbed, namespace, group).values() if node) < 4,
        timeout=90,
        interval=0.05,
    )
    testbed.kill_extender(signal.SIGKILL)
    at_kill = phases(testbed, namespace, group)
    bound_at_kill = sorted(n for n, (node, _) in at_kill.items() if node)
    assert 0 < len(bound_at_kill) < 4, at_kill
    wait_for(
        "a bound member finished while the extender was down",
        lambda: any(phases(testbed, namespace, group)[n][1] == "Succeeded" for n in bound_at_kill),
        timeout=60,
    )
    testbed.start_extender({"PHALANX_GANG_BIND_DELAY_SECONDS": "1"})

    def whole() -> dict[str, tuple[str | None, str]] | None:
        now = phases(testbed, namespace, group)
        return now if len(now) == 4 and all(node for node, _ in now.values()) else None

    try:
        done = wait_for("every member bound (the gang completed)", whole, timeout=60)
    except AssertionError as stuck:
        msg = f"{stuck}; killed with {bound_at_kill} bound; members now {phases(testbed, namespace, group)}"
        raise AssertionError(msg) from stuck
    print(f"killed with {bound_at_kill} bound; after the restart: {done}")
    assert double_booked(list_pods(testbed.http)) == []
    recovered = [
        e["message"] for e in events_for(testbed.http, namespace, group) if e["reason"] == "GangRecovered"
    ]
    assert any("finished since" in m for m in recovered), recovered


def test_a_plan_naming_gpus_another_pod_holds_is_rolled_back_not_carried_out(
    testbed: Testbed, namespace: str
) -> None:
    """A plan on a PodGroup is a claim, checked before recovery carries it out.

    A stale plan (its node deleted and re-added, its GPUs given to others meanwhile) and one written by
    hand look the same to recovery: it bound the unbound members "exactly as planned", onto GPUs another
    pod held, and the soak saw GPU indices held twice. Here the plan is written by hand (the member's
    scheduler is one nobody runs, so only recovery could bind it), naming the GPU a running pod holds.
    """
    create_pod(testbed.http, namespace, gpu_pod("holder", 1))
    holder = wait_pod(testbed.http, namespace, "holder", "running", running, timeout=90)
    node, gpus = holder["spec"]["nodeName"], gpus_of(holder)
    forged = create_pod(testbed.http, namespace, member("forged-0", "forged", 1, scheduler="nobody"))
    group = podgroup("forged", 1)
    plan = [Assignment(f"{namespace}/forged-0", forged["metadata"]["uid"], node, gpus)]
    group["metadata"]["annotations"] = {"phalanx.io/gang-plan": encode_plan(plan)}
    create_podgroup(testbed.http, namespace, group)

    def told() -> str | None:
        recovered = [
            e for e in events_for(testbed.http, namespace, "forged") if e["reason"] == "GangRecovered"
        ]
        return str(recovered[0]["message"]) if recovered else None

    message = wait_for("recovery of the forged plan", told, timeout=60)
    assert f"GPUs {list(gpus)} on {node}, planned for forged-0, are held by other pods now" in message, (
        message
    )
    assert get_pod(testbed.http, namespace, "forged-0")["spec"].get("nodeName") is None
    assert double_booked(list_pods(testbed.http)) == []
    wait_for("the plan annotation removed", partial(plan_removed, testbed, namespace, "forged"), timeout=15)
