"""Admission gates on the real control plane: pods are created gated and released whole, in fair order.

Guards against a soak's collapse: kube-scheduler retries every pod the extender turned down, so with
thousands pending a reserved gang's members arrive minutes apart. With the gate webhook
(``manifests/admission-gate-webhook.yaml``) a pod of scheduler ``phalanx`` is created with the gate
``phalanx.io/admission`` and kube-scheduler does not see it until the placement manager's leader
releases its group. The session's bed runs gates on, as shipped; a test about the extender's own gates
takes the gate webhook away meanwhile (``tests/e2e/conftest.py``: ``ungated``), as while it is down.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from localbed import Testbed
from workload import (
    QUEUES,
    create_pod,
    create_podgroup,
    create_queue,
    delete_pods,
    ensure_namespace,
    events_for,
    get_pod,
    gpu_pod,
    list_pods,
    member,
    metric_value,
    podgroup,
    queue,
    scrape,
    wait_for,
)

from scheduling.model import ADMISSION_GATE, GATE_STAMP
from tests.conftest import REPO
from tests.e2e.test_single_pod import metric

pytestmark = pytest.mark.both_modes

GATE = {"name": ADMISSION_GATE}
STARVE_AFTER = 5


@pytest.fixture(scope="module")
def gated_bed(testbed: Testbed) -> Testbed:
    """The session's bed: it runs the shipped configuration, gates on (three 8-GPU nodes).

    Waited for until its placement manager leads and its cache shows a node with 8 GPUs free: only the
    leader lets a pod in at the door (a replica that does not lead, or not yet, gates every pod), it
    decides on what its cache shows, and these tests may be the session's first, run while the nodes
    just registered are still on their way to that cache.
    """
    wait_for("the placement manager leading, the nodes in its cache", lambda: _ready(testbed), timeout=60)
    return testbed


def _ready(bed: Testbed) -> bool:
    page = scrape(f"http://127.0.0.1:{bed.placement_metrics_ports['placement']}/metrics")
    leads = metric_value(page, "phalanx_placement_leader") == 1
    return leads and (metric_value(page, "phalanx_gpu_largest_free_block") or 0) >= 8


@pytest.fixture
def ns(gated_bed: Testbed, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"gates-{request.node.name.split('_')[1]}-{int(time.time() * 1000) % 100000}"
    ensure_namespace(gated_bed.http, name)
    yield name
    delete_pods(gated_bed.http, name, timeout=30)


def _node(bed: Testbed, namespace: str, name: str) -> str | None:
    node = get_pod(bed.http, namespace, name)["spec"].get("nodeName")
    return None if node is None else str(node)


def _gates(pod: dict[str, Any]) -> list[dict[str, str]]:
    return list(pod["spec"].get("schedulingGates") or [])


def _reasons(bed: Testbed, namespace: str, name: str, reason: str) -> list[str]:
    return [str(e["message"]) for e in events_for(bed.http, namespace, name) if e.get("reason") == reason]


def test_a_pod_that_can_start_now_goes_in_ungated_as_it_is_created(gated_bed: Testbed, ns: str) -> None:
    created = create_pod(gated_bed.http, ns, gpu_pod("solo", 2))
    assert _gates(created) == [], "the leader's door lets a pod on its own in when it would release it now"
    assert created["metadata"]["annotations"][GATE_STAMP] == "answered", "the webhook answered for it"
    other = create_pod(gated_bed.http, ns, gpu_pod("plain", 0, scheduler="default-scheduler"))
    assert _gates(other) == [], "a pod of another scheduler is not gated"
    node = wait_for("the pod bound", lambda: _node(gated_bed, ns, "solo"), timeout=30)
    scheduled = wait_for("its Scheduled event", lambda: _reasons(gated_bed, ns, "solo", "Scheduled"))
    assert node in scheduled[0], scheduled
    time.sleep(2)  # several release passes since the cache saw it: the one that would have told it is past
    told = [str(e["reason"]) for e in events_for(gated_bed.http, ns, "solo")]
    assert not [r for r in told if r.startswith("Admission")], f"it never waited: nothing to tell: {told}"


def test_a_pod_goes_in_at_once_past_a_gang_still_waiting_for_members(gated_bed: Testbed, ns: str) -> None:
    http = gated_bed.http
    create_podgroup(http, ns, podgroup("trio", 3))
    for i in range(2):
        create_pod(http, ns, member(f"trio-{i}", "trio", 4))  # two of three: the gang waits gated
    created = create_pod(http, ns, gpu_pod("solo", 2))
    assert _gates(created) == [], "the pass would release it past the gang, so the door lets it in"
    wait_for("the pod bound", lambda: _node(gated_bed, ns, "solo"), timeout=30)
    assert [_gates(get_pod(http, ns, f"trio-{i}")) for i in range(2)] == [[GATE], [GATE]]


def test_a_gang_stays_gated_until_whole_then_is_released_at_once(gated_bed: Testbed, ns: str) -> None:
    http = gated_bed.http
    create_podgroup(http, ns, podgroup("trio", 3))
    for i in range(2):
        create_pod(http, ns, member(f"trio-{i}", "trio", 4))
    time.sleep(3)  # several release passes: two of three members exist
    pods = list_pods(http, ns)
    assert [_gates(p) for p in pods] == [[GATE], [GATE]], "an incomplete gang stays gated"
    create_pod(http, ns, member("trio-2", "trio", 4))

    def nodes() -> list[str] | None:
        names = [str(p["spec"].get("nodeName") or "") for p in list_pods(http, ns)]
        return names if len(names) == 3 and all(names) else None

    assert len(wait_for("all three bound", nodes, timeout=30)) == 3
    released = _reasons(gated_bed, ns, "trio", "AdmissionReleased")
    assert len(released) == 1, f"one release of the whole gang, on its PodGroup: {released}"


@pytest.mark.extender_only("the extender's answers to nominated members; the sidecar has plans instead")
def test_a_released_gang_is_tried_on_its_planned_nodes_alone(gated_bed: Testbed, ns: str) -> None:
    """The pass nominates each member to the node its plan puts it on before removing the gate.

    kube-scheduler then tries that node first and alone, so the extender is asked about one node for
    every member, the first one too (its reservation is made on that call). Without the nominations the
    first member is asked about with every node, whatever the extender then nominates for the rest.
    """
    http = gated_bed.http
    single = metric(gated_bed, "phalanx_extender_filter_answers_total", path="single")
    create_podgroup(http, ns, podgroup("trio", 3))
    for i in range(3):
        create_pod(http, ns, member(f"trio-{i}", "trio", 3))
    wait_for("all three bound", lambda: all(_node(gated_bed, ns, f"trio-{i}") for i in range(3)), timeout=30)
    asked_alone = metric(gated_bed, "phalanx_extender_filter_answers_total", path="single") - single
    assert asked_alone >= 3, f"each member tried on its nominated node alone: {asked_alone} of 3"


def test_a_pod_over_its_queue_limit_stays_gated_with_the_reason(gated_bed: Testbed, ns: str) -> None:
    http = gated_bed.http
    create_queue(http, queue(f"lim-{ns}", quota=2, weight=1, limit=4))
    try:
        pod = gpu_pod("big", 8)
        pod["metadata"]["labels"] = {"phalanx.io/queue": f"lim-{ns}"}
        create_pod(http, ns, pod)
        waiting = wait_for(
            "the waiting event", lambda: _reasons(gated_bed, ns, "big", "AdmissionWaiting"), timeout=30
        )
        assert (
            waiting[0]
            == f"kept gated: queue lim-{ns}: over its GPU limit (limit 4, allocated 0, this job needs 8)"
        )
        assert _gates(get_pod(http, ns, "big")) == [GATE]
        assert not [e for e in events_for(http, ns, "big") if e.get("reason") == "FailedScheduling"], (
            "kube-scheduler never tried it"
        )
    finally:
        http.request("DELETE", f"{QUEUES}/lim-{ns}")


def test_with_the_webhook_down_pods_are_created_ungated_and_still_scheduled(
    gated_bed: Testbed, ns: str
) -> None:
    gated_bed.set_admission_gate(enabled=False)
    try:
        created = create_pod(gated_bed.http, ns, gpu_pod("direct", 1))
        assert _gates(created) == []
        wait_for("the ungated pod bound", lambda: _node(gated_bed, ns, "direct"), timeout=30)
    finally:
        gated_bed.set_admission_gate(enabled=True)


def test_a_new_leader_releases_what_its_predecessor_kept_gated(gated_bed: Testbed, ns: str) -> None:
    http = gated_bed.http
    name = f"ho-{ns}"
    create_queue(http, queue(name, quota=2, weight=1, limit=2))
    try:
        create_podgroup(http, ns, podgroup("pair", 2))
        for i in range(2):
            pod = member(f"pair-{i}", "pair", 2)
            pod["metadata"]["labels"]["phalanx.io/queue"] = name
            create_pod(http, ns, pod)
        wait_for("the waiting event", lambda: _reasons(gated_bed, ns, "pair", "AdmissionWaiting"), timeout=30)
        gated_bed.start_placement("placement-b", webhook=False)
        gated_bed.kill_placement(signal.SIGKILL)
        body = queue(name, quota=2, weight=1, limit=8)
        current = http.request("GET", f"{QUEUES}/{name}")
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        http.request("PUT", f"{QUEUES}/{name}", body=body)
        wait_for(
            "both members bound by the new leader",
            lambda: all(p["spec"].get("nodeName") for p in list_pods(http, ns)),
            timeout=40,
        )
        assert len(_reasons(gated_bed, ns, "pair", "AdmissionReleased")) == 1
    finally:
        gated_bed.kill_placement(signal.SIGTERM, name="placement-b")
        if not gated_bed.is_running("placement"):
            gated_bed.start_placement()
        http.request("DELETE", f"{QUEUES}/{name}")


def test_the_pass_removes_only_its_own_gate(gated_bed: Testbed, ns: str) -> None:
    http = gated_bed.http
    pod = gpu_pod("shared", 1)
    pod["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    assert _gates(create_pod(http, ns, pod)) == [{"name": "example.com/quota"}, GATE]
    left = wait_for(
        "phalanx's gate removed",
        lambda: (
            (gates := _gates(get_pod(http, ns, "shared"))) != [{"name": "example.com/quota"}, GATE] and gates
        ),
        timeout=30,
    )
    assert left == [{"name": "example.com/quota"}], "the other gate stays"
    assert _node(gated_bed, ns, "shared") is None
    http.request(
        "PATCH",
        f"/api/v1/namespaces/{ns}/pods/shared",
        body=[{"op": "remove", "path": "/spec/schedulingGates/0"}],
        content_type="application/json-patch+json",
    )
    wait_for(
        "bound once its owner removed the other gate", lambda: _node(gated_bed, ns, "shared"), timeout=30
    )


@pytest.mark.extender_only("the extender's verdict on pods the uninstall ungates; the plugin plans none")
def test_uninstalling_takes_the_gate_off_every_gated_pod(gated_bed: Testbed, ns: str) -> None:
    http = gated_bed.http
    name = f"un-{ns}"
    create_queue(http, queue(name, quota=1, weight=1, limit=1))
    try:
        pod = gpu_pod("stuck", 2)
        pod["metadata"]["labels"] = {"phalanx.io/queue": name}
        assert _gates(create_pod(http, ns, pod)) == [GATE]
        command = [sys.executable, "-m", "placement", "--kubeconfig", str(gated_bed.kubeconfig)]
        done = subprocess.run(
            [*command, "--remove-admission-gates"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        assert "removed the admission gate from 1 pod(s)" in done.stderr
        assert _gates(get_pod(http, ns, "stuck")) == []
        turned_down = wait_for(
            "the extender's own turn-down",
            lambda: _reasons(gated_bed, ns, "stuck", "FailedScheduling"),
            timeout=30,
        )
        assert f"queue {name}: over its GPU limit" in turned_down[0], turned_down
    finally:
        http.request("DELETE", f"{QUEUES}/{name}")


@pytest.fixture
def starving_soon(gated_bed: Testbed) -> Iterator[Testbed]:
    """The placement manager restarted with a starvation rule of 5 s (not 300); restored after."""
    shipped = gated_bed.placement_args
    gated_bed.kill_placement(signal.SIGTERM)
    gated_bed.placement_args = (*shipped, "--gate-starve-after-seconds", str(STARVE_AFTER))
    gated_bed.start_placement()
    try:
        yield gated_bed
    finally:
        gated_bed.kill_placement(signal.SIGTERM)
        gated_bed.placement_args = shipped
        gated_bed.start_placement()


@pytest.mark.parametrize("gpus", [9, 5000])
def test_a_pod_that_can_never_fit_says_so_and_holds_no_room_from_the_others(
    starving_soon: Testbed, ns: str, gpus: int
) -> None:
    """The hostile-input run: one such pod, once past the starvation rule, kept every GPU pod gated.

    20 of the 24 GPUs are taken first, so the 4 left are fewer than the pod "needs": before, it kept
    them all once it had waited past the rule, and the 1-GPU pod stayed gated beside them.
    """
    gated_bed = starving_soon
    for name, size in (("filler-a", 8), ("filler-b", 8), ("filler-c", 4)):
        create_pod(gated_bed.http, ns, gpu_pod(name, size))
        wait_for(f"{name} bound", partial(_node, gated_bed, ns, name), timeout=30)
    create_pod(gated_bed.http, ns, gpu_pod("never", gpus))
    time.sleep(STARVE_AFTER + 1)  # past the starvation rule: it would keep room now, if it could
    create_pod(gated_bed.http, ns, gpu_pod("small", 1))
    wait_for("the 1-GPU pod bound beside it", lambda: _node(gated_bed, ns, "small"), timeout=30)
    kept = wait_for(
        "the never-fitting pod's sentence",
        lambda: [m for m in _reasons(gated_bed, ns, "never", "AdmissionWaiting") if "can never" in m],
        timeout=30,
    )
    assert kept[-1] == (
        f"kept gated: can never be placed on this cluster as it is: a pod needs {gpus} GPUs on one node; "
        "the largest of the schedulable nodes offers 8"
    )
    assert _gates(get_pod(gated_bed.http, ns, "never")) == [GATE]
