"""Two placement managers with leader election: one acts, the other takes over when it dies.

High availability, the placement manager's part: the test bed's manager leads; a second
replica starts as a warm standby. An elastic MPIJob grows while both run (one resize, one event: the
standby writes nothing). The leader is SIGKILLed and, at once, a gang arrives that needs the elastic
job to shrink: the standby takes the Lease over once it lapses (3 s on the test bed) and shrinks the
job; the time from the SIGKILL to that first action is printed. No action is made twice.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from localbed import Testbed
from workload import (
    create_mpijob,
    create_pod,
    create_podgroup,
    elastic_mpijob,
    get_mpijob,
    gpu_pod,
    list_pods,
    member,
    podgroup,
    wait_for,
)

from tests.e2e.conftest import bound_gangs, deleted_after, gang

pytestmark = pytest.mark.both_modes


def _replicas(bed: Testbed, namespace: str) -> int:
    return int(get_mpijob(bed.http, namespace, "ha")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"])


def _resizes(bed: Testbed, namespace: str) -> list[tuple[str, int]]:
    """Every Resized event on the MPIJob with how many times it was recorded."""
    query = {"fieldSelector": "involvedObject.name=ha,reason=Resized"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return sorted((str(e["message"]), int(e.get("count") or 1)) for e in events)


@pytest.fixture
def standby(operator: Testbed) -> Iterator[str]:
    """A second placement manager started as a standby; yields the leader's identity; restores after."""
    bed = operator
    first = wait_for("a placement manager leads", bed.placement_leader, timeout=30)
    bed.start_placement("placement-b", webhook=False)
    try:
        yield first
    finally:  # back as the test bed had it: "placement" leads, "placement-b" is gone
        if not bed.is_running("placement"):
            bed.start_placement()
        holder = bed.placement_leader()
        bed.kill_placement(signal.SIGTERM, name="placement-b")  # a clean stop releases the Lease
        if holder != first:  # "placement-b" led: "placement" takes the released Lease
            wait_for(
                "the test bed's manager leads", lambda: bed.placement_leader() not in ("", holder), timeout=30
            )


def test_the_standby_takes_over_within_the_lease_and_no_action_is_made_twice(
    operator: Testbed, namespace: str, standby: str
) -> None:
    first = standby
    bed, http = operator, operator.http
    time.sleep(2)  # four reads of the Lease by the standby
    assert bed.placement_leader() == first, "the standby waits while the leader renews"
    body = elastic_mpijob("ha", workers=2, gpus_per_worker=2, max_workers="6", min_available=3)
    create_mpijob(http, namespace, body)
    with deleted_after(bed, namespace, "ha"):
        wait_for("the job grown to 6", lambda: _replicas(bed, namespace) == 6, timeout=60)
        time.sleep(2)  # two more passes of each replica: nothing more may happen
        grown = _resizes(bed, namespace)
        # One resize, recorded once (the standby wrote nothing), saying why; the model's figures after
        # the reason are the sizing's business (tests/scheduling/elastic), not high availability's.
        assert [count for _, count in grown] == [1], grown
        assert grown[0][0].startswith("resized 2 -> 6 workers: grows into free GPUs"), grown

        bed.kill_placement(signal.SIGKILL)
        killed = time.monotonic()
        create_podgroup(http, namespace, podgroup("wide", 2))
        for i in range(2):
            create_pod(http, namespace, member(f"wide-{i}", "wide", 8))
        wait_for(
            "the job shrunk by the standby",
            lambda: _replicas(bed, namespace) == 4,
            timeout=60,
            interval=0.05,
        )
        failover = time.monotonic() - killed
        second = bed.placement_leader()
        print(f"\nSIGKILL of the leader -> the standby's first action (shrink 6 -> 4): {failover:.2f}s")
        assert second not in ("", first), "the standby holds the Lease"
        assert failover < 3 + 1 + 3, "within the lease (3 s), a pass (1 s) and slack for two busy cores"

        def gang_bound() -> bool:
            pods = [p for p in list_pods(http, namespace) if p["metadata"]["name"].startswith("wide-")]
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        wait_for("the gang bound", gang_bound, timeout=60)
        time.sleep(2)
        assert [count for _, count in _resizes(bed, namespace)] == [1, 1], "each resize made once"
        assert len(_resizes(bed, namespace)) == 2
        for i in range(2):
            http.request(
                "DELETE", f"/api/v1/namespaces/{namespace}/pods/wide-{i}", body={"gracePeriodSeconds": 0}
            )


def _reclaimed(bed: Testbed, namespace: str) -> list[tuple[str, int]]:
    """Every Reclaimed event (one per evicted pod) with how many times it was recorded."""
    query = {"fieldSelector": "reason=Reclaimed"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query).get("items") or []
    return sorted((str(e["involvedObject"]["name"]), int(e.get("count") or 1)) for e in events)


def test_a_reclaim_due_when_the_leader_dies_is_made_once_by_the_standby(
    operator: Testbed, namespace: str, queues: None, standby: str
) -> None:
    """Queue b holds three gangs over its quota; the leader is SIGKILLed as queue a's gang arrives.

    The quota scenario of ``test_queues``: a (quota 8) holds 6 GPUs and wants 4 more, 2 are free, b holds
    12 (quota 8). The standby takes the Lease over and reclaims one of b's gangs, whole, once.
    """
    bed, http = operator, operator.http
    keeper = gpu_pod("a-keeper", 2)
    keeper["metadata"]["labels"] = {"phalanx.io/queue": "a", "phalanx.io/preemptible": "false"}
    create_pod(http, namespace, keeper)
    for name, q in (("a0", "a"), ("b0", "b"), ("b1", "b"), ("b2", "b"), ("c0", "c")):
        gang(bed, namespace, name, q)
    wait_for("22 GPUs in use", lambda: sum(bound_gangs(bed, namespace).values()) == 10, timeout=60)
    bed.kill_placement(signal.SIGKILL)
    killed = time.monotonic()
    gang(bed, namespace, "a1", "a")
    wait_for("a reclaim", lambda: _reclaimed(bed, namespace), timeout=60, interval=0.05)
    print(f"\nSIGKILL of the leader -> the standby's first reclaim: {time.monotonic() - killed:.2f}s")

    def a1_bound() -> dict[str, int] | None:
        counts = bound_gangs(bed, namespace)
        if any(0 < counts.get(g, 0) < 2 for g in ("b0", "b1", "b2", "c0")):
            return None  # an eviction under way: the standby deletes a gang's members one by one
        return counts if counts.get("a1") == 2 else None

    counts = wait_for("a1 bound and no eviction under way", a1_bound, timeout=60)
    # Which gang goes is test_queues' concern: b and c are both over their quotas (8 and 0), so the
    # quota guarantee may take either, depending on the view the standby starts from. This test checks
    # that one gang goes, whole, once.
    gone = sorted(g for g in ("b0", "b1", "b2", "c0") if counts.get(g, 0) == 0)
    assert len(gone) == 1, f"one gang over its queue's quota gave the room back: {counts}"
    time.sleep(3)  # three more passes: nothing more is reclaimed
    assert _reclaimed(bed, namespace) == [(f"{gone[0]}-0", 1), (f"{gone[0]}-1", 1)], "one gang, once"
