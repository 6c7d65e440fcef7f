"""Crash safety: SIGKILL the extender while a gang is half-bound; the restarted one finishes the job."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    double_booked,
    get_podgroup,
    list_pods,
    member,
    podgroup,
    wait_for,
)


@pytest.fixture
def slow_binding_extender(testbed: Testbed) -> Iterator[None]:
    """The extender with a gang's Bindings spread 1 s apart, so a kill lands mid-bind; restored after."""
    testbed.kill_extender(signal.SIGTERM)
    testbed.start_extender({"PHALANX_GANG_BIND_DELAY_SECONDS": "1"})
    yield
    testbed.kill_extender(signal.SIGTERM)
    testbed.start_extender()


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
    wait_for(
        "the plan annotation removed",
        lambda: (
            "phalanx.io/gang-plan"
            not in (get_podgroup(testbed.http, namespace, "crash")["metadata"].get("annotations") or {})
        ),
        timeout=15,
    )
