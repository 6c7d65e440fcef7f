"""The framework sidecar on the real control plane: kube-scheduler with PhalanxPlan places planned pods.

The session's bed switched to sidecar mode (``Testbed.use_sidecar``): the ``phalanx-scheduler`` binary
built from ``sidecar/`` (kube-scheduler v1.36.3 with the plugin compiled in) with
``sidecar/scheduler-config.yaml``, and the placement manager with ``--gate-plan-on-pod=true`` and the
plan key; admission gates, TLS and the webhooks as shipped.
The extender runs but nobody calls it: its request counters prove it. Every pod reaches its node
through the plan its release wrote on it, and kube-scheduler runs no Score plugin for it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    get_pod,
    gpu_pod,
    gpus_of,
    list_pods,
    member,
    metric_value,
    podgroup,
    running,
    said,
    scrape,
    wait_for,
    wait_pod,
)

from tests.e2e.conftest import preempted, priority_classes
from tests.e2e.test_decisive import score_runs
from tests.e2e.test_single_pod import metric
from tests.e2e.test_topology import BRIDGE_PAIRS

PLAN = "phalanx.io/plan"
SEAL = "phalanx.io/plan-seal"
GPUS = "phalanx.io/gpus"


pytestmark = pytest.mark.sidecar_only
"""On the session's bed switched to the framework sidecar (``tests/e2e/conftest.py``)."""


@pytest.fixture
def bed(testbed: Testbed) -> Testbed:
    """The session's bed in sidecar mode, once its door can let pods in (its leader has the nodes)."""
    wait_for("the placement manager leading, the nodes in its cache", lambda: _ready(testbed), timeout=60)
    return testbed


def _ready(bed: Testbed) -> bool:
    page = scrape(f"http://127.0.0.1:{bed.placement_metrics_ports['placement']}/metrics")
    leads = metric_value(page, "phalanx_placement_leader") == 1
    return leads and (metric_value(page, "phalanx_gpu_largest_free_block") or 0) >= 8


@pytest.fixture
def ns(namespace: str) -> str:
    return namespace


def extender_calls(bed: Testbed) -> float:
    verbs = ("filter", "prioritize", "bind")
    return sum(metric(bed, "phalanx_extender_requests_total", outcome="ok", verb=v) for v in verbs)


def test_a_pod_let_in_at_the_door_binds_where_its_plan_says_with_a_bridged_pair_and_no_score_or_extender(
    bed: Testbed, ns: str
) -> None:
    """The door lets it in ungated, its plan written by the gate webhook in its own patch."""
    scores, calls = score_runs(bed), extender_calls(bed)
    created = create_pod(bed.http, ns, gpu_pod("pair", 2))
    assert not created["spec"].get("schedulingGates"), "the leader's door lets a pod in that can start now"
    assert PLAN in created["metadata"]["annotations"], "it goes in with its plan"
    pod = wait_pod(bed.http, ns, "pair", "running", running, timeout=60)
    node, _, planned = pod["metadata"]["annotations"][PLAN].partition(":")
    assert pod["spec"]["nodeName"] == node
    assert gpus_of(pod) == tuple(int(i) for i in planned.split(","))
    assert gpus_of(pod) in BRIDGE_PAIRS, f"got {gpus_of(pod)} on a free node"
    assert score_runs(bed) == scores, "kube-scheduler scored a planned pod"
    assert extender_calls(bed) == calls, "the extender was called in sidecar mode"


def test_a_gang_binds_whole_on_its_plans(bed: Testbed, ns: str) -> None:
    create_podgroup(bed.http, ns, podgroup("g", 3))
    for i in range(3):
        create_pod(bed.http, ns, member(f"g-{i}", "g", 4))

    def all_running() -> list[dict[str, Any]] | None:
        pods = [p for p in list_pods(bed.http, ns) if running(p)]
        return pods if len(pods) == 3 else None

    pods = wait_for("every member running", all_running, timeout=90)
    held = [(p["spec"]["nodeName"], g) for p in pods for g in gpus_of(p)]
    assert len(held) == 12 and len(set(held)) == 12, f"members share a GPU: {sorted(held)}"
    for p in pods:
        assert p["metadata"]["annotations"][PLAN].startswith(p["spec"]["nodeName"] + ":")
    # A gang is never let in at the door: its plans came with the pass's ungating patches.


def test_a_plan_whose_gpus_were_taken_meanwhile_is_planned_again_and_binds_on_the_new_one(
    bed: Testbed, ns: str
) -> None:
    """kube-scheduler is stopped while the pod is released; a pod bound by hand then takes its GPUs.

    The release pass sees the plan no longer holds and writes a new one; started again, kube-scheduler
    binds the pod on the new plan, never on GPUs another pod holds.
    """
    bed.cluster.stop_scheduler()
    try:
        create_pod(bed.http, ns, gpu_pod("late", 2))
        first = wait_for(
            "a plan written on the pod",
            lambda: get_pod(bed.http, ns, "late")["metadata"].get("annotations", {}).get(PLAN),
            timeout=60,
        )
        node, _, planned = first.partition(":")
        held = {"phalanx.io/gpus": planned}
        squatter = gpu_pod("squatter", 2, scheduler="default-scheduler", annotations=held)
        squatter["spec"]["nodeName"] = node  # bound by hand, as a pod of no scheduler
        create_pod(bed.http, ns, squatter)
        second = wait_for(
            "a new plan",
            lambda: (p := get_pod(bed.http, ns, "late")["metadata"]["annotations"][PLAN]) != first and p,
            timeout=60,
        )
    finally:
        bed.cluster.restart_scheduler()
    pod = wait_pod(bed.http, ns, "late", "running", running, timeout=60)
    assert pod["metadata"]["annotations"][PLAN] == second
    assert f"{pod['spec']['nodeName']}:" + ",".join(map(str, gpus_of(pod))) == second
    if pod["spec"]["nodeName"] == node:
        assert not set(gpus_of(pod)) & {int(i) for i in planned.split(",")}


def test_a_plan_phalanx_did_not_seal_is_not_followed_and_phalanx_plans_the_pod_itself(
    bed: Testbed, ns: str
) -> None:
    """Pods created while the placement manager is down, with plans their author wrote, wait with the reason.

    One carries a plan and no seal; one a seal that is no HMAC of the plan key; one the plan and the
    seal the placement manager wrote on another pod (``placed``, running), copied whole. The gate
    webhook cannot answer, so they are created ungated (``failurePolicy: Ignore``) with what their
    author wrote. The plugin follows none of those plans (``sidecar/plan/seal.go``) and
    ``FailedScheduling`` says why. Back, the placement manager believes none of them either
    (``kubeio.plan_seal.PlanSeal.sealed``): it plans each pod itself, and each binds where phalanx's
    sealed plan says.
    """
    create_pod(bed.http, ns, gpu_pod("placed", 1))
    placed = wait_pod(bed.http, ns, "placed", "running", running, timeout=60)["metadata"]["annotations"]
    copied = {key: placed[key] for key in (PLAN, SEAL)}
    wanted = f"{placed[PLAN].partition(':')[0]}:6,7"
    forged = {
        "unsealed": ({PLAN: wanted}, "has no phalanx.io/plan-seal"),
        "forged": ({PLAN: wanted, SEAL: "1796000000.bm90IGEgc2lnbmF0dXJl"}, "does not match its plan"),
        "copied": (copied, "does not match its plan"),
    }
    bed.kill_placement(signal.SIGTERM)
    try:
        for name, (wrote, _) in forged.items():
            created = create_pod(bed.http, ns, gpu_pod(name, 1, annotations=wrote))
            assert not created["spec"].get("schedulingGates"), "created around the gate webhook"
        for name, (_, reason) in forged.items():
            message = wait_for(
                f"{name}: FailedScheduling saying why",
                partial(said, bed.http, ns, name, "FailedScheduling", "does not follow this pod's plan"),
                timeout=60,
            )
            assert reason in message, message
            assert not get_pod(bed.http, ns, name)["spec"].get("nodeName"), f"{name} was bound"
    finally:
        bed.start_placement()
    for name, (wrote, _) in forged.items():
        pod = wait_pod(bed.http, ns, name, "running", running, timeout=90)
        now = pod["metadata"]["annotations"]
        assert now[SEAL] != wrote.get(SEAL), f"{name}: the seal its author wrote stayed"
        assert f"{pod['spec']['nodeName']}:" + ",".join(map(str, gpus_of(pod))) == now[PLAN], name


def test_a_plan_kube_scheduler_refuses_for_what_phalanx_does_not_model_is_made_on_another_node(
    bed: Testbed, ns: str
) -> None:
    """A host port phalanx does not model is taken on the node its plan names: the pod binds elsewhere.

    ``anchor`` shows the node phalanx packs one-GPU pods on; a pod of no scheduler, bound there by
    hand, holds host port 7000. ``ported`` asks for one GPU and that port: phalanx plans it on the
    same node, kube-scheduler's NodePorts plugin turns the plan down, and once the plan has been
    refused past ``--gate-plan-refused-after-seconds`` (8 s on this bed) the release pass plans it on
    another node, which kube-scheduler accepts.
    """
    create_pod(bed.http, ns, gpu_pod("anchor", 1))
    node = wait_pod(bed.http, ns, "anchor", "running", running, timeout=60)["spec"]["nodeName"]
    porter = gpu_pod("porter", 0, scheduler="nobody")
    porter["spec"]["nodeName"] = node
    porter["spec"]["containers"][0]["ports"] = [{"containerPort": 7000, "hostPort": 7000}]
    create_pod(bed.http, ns, porter)
    ported = gpu_pod("ported", 1)
    ported["spec"]["containers"][0]["ports"] = [{"containerPort": 7000, "hostPort": 7000}]
    create_pod(bed.http, ns, ported)
    refusal = wait_for(
        "kube-scheduler turning the first plan down for the port",
        partial(said, bed.http, ns, "ported", "FailedScheduling", "free ports"),
        timeout=60,
    )
    print(refusal)
    pod = wait_pod(bed.http, ns, "ported", "running", running, timeout=90)
    assert pod["spec"]["nodeName"] != node, f"bound on {node}, where the port is taken"
    told = said(bed.http, ns, "ported", "Replanned", f"kube-scheduler kept turning its plan on {node} down")
    assert told is not None, "the new plan is told on the pod, with why"
    assert pod["metadata"]["annotations"][PLAN].startswith(pod["spec"]["nodeName"] + ":")


LOW, HIGH = "e2e-sidecar-low", "e2e-sidecar-high"


@pytest.fixture
def classes(bed: Testbed) -> Iterator[Testbed]:
    """Two PriorityClasses, 10 and 50, removed afterwards."""
    with priority_classes(bed, {LOW: 10, HIGH: 50}):
        yield bed


def test_a_higher_priority_pod_preempts_through_its_plan_and_binds_where_it_preempted(
    classes: Testbed, ns: str
) -> None:
    """Three low-priority 8-GPU pods fill the 24 GPUs; an 8-GPU pod of higher priority arrives.

    The release pass lets it go to preempt, with a plan on the GPUs of one victim
    (``preemption_room.plan_over``); kube-scheduler's own preemption evicts the pod holding them, and
    the pod binds on its plan once the victim is gone.
    """
    http = classes.http
    for i in range(3):
        low = gpu_pod(f"low-{i}", 8)
        low["spec"]["priorityClassName"] = LOW
        create_pod(http, ns, low)
    for i in range(3):
        wait_pod(http, ns, f"low-{i}", "running", running, timeout=60)
    on = {get_pod(http, ns, f"low-{i}")["spec"]["nodeName"]: f"low-{i}" for i in range(3)}
    urgent = gpu_pod("urgent", 8)
    urgent["spec"]["priorityClassName"] = HIGH
    create_pod(http, ns, urgent)
    pod = wait_pod(http, ns, "urgent", "running", running, timeout=120)
    node = pod["spec"]["nodeName"]
    assert pod["metadata"]["annotations"][PLAN] == f"{node}:0,1,2,3,4,5,6,7"
    victims = preempted(classes, ns)
    assert victims == [on[node]], f"preempted {victims}; the victim on {node} was {on[node]}"
    left = sorted(p["metadata"]["name"] for p in list_pods(http, ns) if running(p))
    assert left == sorted({*on.values()} - {on[node]} | {"urgent"})


def test_a_gang_binds_whole_even_when_one_member_must_wait(bed: Testbed, ns: str) -> None:
    """The plugin's Permit holds members until the gang's members planned together are all placed.

    kube-scheduler is stopped while a 3 x 8-GPU gang is released (plans for the whole 24 GPUs); a pod
    bound by hand then takes the GPUs one member was planned on. Started again, kube-scheduler places
    the two other members and holds them at Permit: none is bound while the third cannot be. Once the
    squatter is gone, the third is placed and all three bind.
    """
    bed.cluster.stop_scheduler()
    try:
        create_podgroup(bed.http, ns, podgroup("g", 3))
        for i in range(3):
            create_pod(bed.http, ns, member(f"g-{i}", "g", 8))
        last = wait_for("the gang released with its plans", lambda: planned(bed, ns, "g-2"), timeout=60)
        node = str(last).partition(":")[0]
        held = {GPUS: "0,1,2,3,4,5,6,7"}
        squatter = gpu_pod("squatter", 8, scheduler="default-scheduler", annotations=held)
        squatter["spec"]["nodeName"] = node
        create_pod(bed.http, ns, squatter)
    finally:
        bed.cluster.restart_scheduler()
    wait_for(
        "g-2 turned down on its plan",
        partial(said, bed.http, ns, "g-2", "FailedScheduling", "Insufficient nvidia.com/gpu"),
        timeout=60,
    )
    time.sleep(3)  # g-0 and g-1 have been placed and wait at Permit by now
    bound = [m for m in ("g-0", "g-1", "g-2") if get_pod(bed.http, ns, m)["spec"].get("nodeName")]
    assert bound == [], f"{bound} bound while g-2 cannot be"
    bed.http.request("DELETE", f"/api/v1/namespaces/{ns}/pods/squatter", query={"gracePeriodSeconds": "0"})
    for m in ("g-0", "g-1", "g-2"):
        wait_pod(bed.http, ns, m, "running", running, timeout=90)


def planned(bed: Testbed, ns: str, name: str) -> str | None:
    annotations = get_pod(bed.http, ns, name)["metadata"].get("annotations") or {}
    return annotations.get(PLAN)
