"""Two scheduler replicas: the standby stays passive, then finishes the leader's work.

High availability, the scheduler's part, on a control plane of its own, in both modes; the schedulers
elect a leader with a 4 s Lease (``kube-system/phalanx-scheduler``).

- Extender mode: kube-scheduler-a calls extender, kube-scheduler-b calls extender-b; the extenders act
  on their own only while their scheduler calls them (duty window 3 s), and look for half-bound gangs
  every 0.3 s. A gang's Bindings are spread 1 s apart: the standby must not touch a gang the leader
  binds (no GangRecovered for it); then a SIGKILL of the leader pair lands mid-bind of a second gang,
  and the standby pair takes over, completes that gang once, and binds a gang created meanwhile.
- Sidecar mode (``sidecar/``): two ``phalanx-scheduler`` replicas, the plugin inside each. The standby
  binds nothing while the leader leads; a leader that dies between two of a gang's Bind calls leaves
  the other members with their plans, and the new leader binds them where they were planned, and a
  gang created after the kill.

No GPU index is held twice, no pod is lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from localbed import Testbed
from workload import (
    create_pod,
    create_podgroup,
    double_booked,
    ensure_namespace,
    gpu_pod,
    list_pods,
    member,
    metric_value,
    podgroup,
    scrape,
    wait_for,
)

from testbed.nodes import fleet

NS = "ha"


@pytest.fixture
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    env = {
        "PHALANX_GANG_BIND_DELAY_SECONDS": "1",
        "PHALANX_DUTY_WINDOW_SECONDS": "3",
        "PHALANX_RECOVERY_INTERVAL_SECONDS": "0.3",  # a standby acting alone would act within the bind
    }
    bed = Testbed(Path(tmp_path_factory.mktemp("ha")), scheduler_pairs=2, extender_env=env)
    try:
        bed.start()
        bed.add_nodes(fleet(3, gpus=8))
        ensure_namespace(bed.http, NS)
        yield bed
    finally:
        bed.stop()


def _filters(url: str) -> float:
    """How many filter calls the extender at ``url`` answered."""
    return metric_value(scrape(f"{url}/metrics"), "phalanx_extender_requests_total", verb="filter") or 0.0


def _bound(bed: Testbed, prefix: str) -> tuple[int, int]:
    pods = [
        p
        for p in list_pods(bed.http, NS)
        if p["metadata"]["name"].startswith(prefix) and not p["metadata"].get("deletionTimestamp")
    ]
    return len(pods), sum(1 for p in pods if p["spec"].get("nodeName"))


def _recovered(bed: Testbed) -> list[str]:
    query = {"fieldSelector": "reason=GangRecovered"}
    events = bed.http.request("GET", f"/api/v1/namespaces/{NS}/events", query=query).get("items") or []
    return [f"{e['involvedObject']['name']} x{e.get('count') or 1}: {e['message']}" for e in events]


def test_the_standby_pair_stays_passive_then_finishes_the_leaders_work(pairs: Testbed) -> None:
    bed, http = pairs, pairs.http
    create_pod(http, NS, gpu_pod("warm-up", 1))
    wait_for("the warm-up pod bound", lambda: _bound(bed, "warm-up")[1] == 1, timeout=60)
    calls = {"a": _filters(bed.extender_url), "b": _filters(bed.extender_b_url)}
    leader = "a" if calls["a"] > 0 else "b"
    print(f"\nfilter calls per extender after the warm-up: {calls}; leader pair: {leader}")
    assert (calls["a"] > 0) != (calls["b"] > 0), "only the leader's extender is called"

    create_podgroup(http, NS, podgroup("calm", 4))  # bound by the leader pair alone, over ~3 s
    for i in range(4):
        create_pod(http, NS, member(f"calm-{i}", "calm", 2))
    wait_for("the first gang bound", lambda: _bound(bed, "calm-")[1] == 4, timeout=60, interval=0.05)
    assert _recovered(bed) == [], "the standby's extender left the leader's gang alone while it bound"

    create_podgroup(http, NS, podgroup("crash", 4))
    for i in range(4):
        create_pod(http, NS, member(f"crash-{i}", "crash", 2))
    wait_for("the gang half-bound", lambda: 0 < _bound(bed, "crash-")[1] < 4, timeout=60, interval=0.05)
    scheduler, extender = (
        ("kube-scheduler-a", "extender") if leader == "a" else ("kube-scheduler-b", "extender-b")
    )
    bed.kill(scheduler)
    bed.kill(extender)
    killed = time.monotonic()
    bound_at_kill = _bound(bed, "crash-")[1]
    create_podgroup(http, NS, podgroup("after", 2))
    for i in range(2):
        create_pod(http, NS, member(f"after-{i}", "after", 2))

    def settled() -> tuple[int, int] | None:
        existing, bound = _bound(bed, "crash-")
        return (existing, bound) if bound in (0, existing) and bound in (0, 4) else None

    existing, bound = wait_for("the half-bound gang settled", settled, timeout=60, interval=0.1)
    settled_after = time.monotonic() - killed
    wait_for("the gang created after the kill bound", lambda: _bound(bed, "after-")[1] == 2, timeout=60)
    after_bound = time.monotonic() - killed
    print(
        f"killed the leader pair with {bound_at_kill} of 4 bound; the standby settled it at {bound} of "
        f"{existing} after {settled_after:.1f}s and bound the next gang after {after_bound:.1f}s"
    )
    print(f"GangRecovered events: {_recovered(bed)}")
    assert double_booked(list_pods(http)) == []
    assert len(_recovered(bed)) == 1 and " x1: " in _recovered(bed)[0], "recovered once, by one extender"
    assert (existing, bound) == (4, 4), "no member was deleted, so the gang is completed, none lost"


SIDECAR_NS = "ha-sidecar"
PLAN = "phalanx.io/plan"
BOUND = "Successfully bound pod to node"
"""What kube-scheduler logs at ``--v=2`` for each pod it binds (``schedule_one.go``)."""


@pytest.fixture
def sidecar_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    bed = Testbed(Path(tmp_path_factory.mktemp("ha-sidecar")), scheduler_pairs=2, sidecar=True)
    try:
        bed.start()
        bed.add_nodes(fleet(3, gpus=8))
        ensure_namespace(bed.http, SIDECAR_NS)
        yield bed
    finally:
        bed.stop()


def _binds(bed: Testbed, scheduler: str, prefix: str) -> int:
    """How many pods named ``prefix``... of the namespace ``scheduler``'s log says it bound."""
    log = (bed.logs / f"{scheduler}.log").read_text(errors="replace")
    return sum(1 for line in log.splitlines() if BOUND in line and f'pod="{SIDECAR_NS}/{prefix}' in line)


SCHEDULERS = ("kube-scheduler-a", "kube-scheduler-b")


def _binders(bed: Testbed, prefix: str, count: int) -> dict[str, int]:
    """Each scheduler's binds of pods ``prefix``..., once the logs show ``count`` in all.

    kube-scheduler flushes its log every few seconds (``--log-flush-frequency``, 5 s), so a pod is
    bound a moment before its line is written.
    """

    def logged() -> dict[str, int] | None:
        binds = {name: _binds(bed, name, prefix) for name in SCHEDULERS}
        return binds if sum(binds.values()) >= count else None

    return wait_for(f"kube-scheduler's log lines for the binds of {prefix}", logged, timeout=30, interval=0.5)


def _bound_in(bed: Testbed, prefix: str) -> tuple[int, int]:
    pods = [p for p in list_pods(bed.http, SIDECAR_NS) if p["metadata"]["name"].startswith(prefix)]
    return len(pods), sum(1 for p in pods if p["spec"].get("nodeName"))


def _gang(bed: Testbed, name: str, size: int) -> None:
    create_podgroup(bed.http, SIDECAR_NS, podgroup(name, size))
    for i in range(size):
        create_pod(bed.http, SIDECAR_NS, member(f"{name}-{i}", name, 2))


def _plans(bed: Testbed, prefix: str) -> dict[str, str] | None:
    """Each released pod's plan (``node:gpus``) once every pod named ``prefix``... has one, else ``None``."""
    pods = [p for p in list_pods(bed.http, SIDECAR_NS) if p["metadata"]["name"].startswith(prefix)]
    plans = {
        p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(PLAN, "")
        for p in pods
        if not p["spec"].get("schedulingGates")
    }
    return plans if len(plans) == len(pods) > 0 and all(plans.values()) else None


def _bind_as_planned(bed: Testbed, name: str, plan: str) -> None:
    """Bind pod ``name`` as the plugin's Bind does: a Binding to the plan's node, its GPUs annotated."""
    node, _, gpus = plan.partition(":")
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": SIDECAR_NS, "annotations": {"phalanx.io/gpus": gpus}},
        "target": {"kind": "Node", "name": node},
    }
    bed.http.request("POST", f"/api/v1/namespaces/{SIDECAR_NS}/pods/{name}/binding", body=binding)


def test_the_standby_sidecar_stays_passive_then_completes_a_gang_its_leader_died_binding(
    sidecar_pair: Testbed,
) -> None:
    """The leader dies between two of a gang's Bind calls: the standby binds the rest, on their plans.

    The leader is frozen first (it keeps the Lease until it lapses, and binds nothing), the gang is
    released with its plans, and two members are bound as the leader's Bind would have bound them
    before it died. Members bound count as placed at the plugin's Permit, so the standby's members pass
    it, and the gang is whole with no stale-gang eviction.
    """
    bed, http = sidecar_pair, sidecar_pair.http
    create_pod(http, SIDECAR_NS, gpu_pod("warm-up", 1))
    wait_for("the warm-up pod bound", lambda: _bound_in(bed, "warm-up")[1] == 1, timeout=60)
    binds = _binders(bed, "warm-up", 1)
    print(f"\nwarm-up binds per scheduler: {binds}")
    assert sorted(binds.values()) == [0, 1], "one replica, the leader, bound it"
    leader, standby = sorted(binds, key=lambda name: -binds[name])

    _gang(bed, "calm", 4)
    wait_for("the first gang bound", lambda: _bound_in(bed, "calm-")[1] == 4, timeout=60)
    assert _binders(bed, "calm-", 4) == {leader: 4, standby: 0}, "the standby bound none"

    bed.freeze(leader)
    frozen = time.monotonic()
    _gang(bed, "torn", 4)
    plans = wait_for("the gang released with its plans", lambda: _plans(bed, "torn-"), timeout=60)
    for name in ("torn-0", "torn-1"):
        _bind_as_planned(bed, name, plans[name])
    bed.kill(leader)
    _gang(bed, "after", 2)
    wait_for(
        "the torn gang completed by the new leader", lambda: _bound_in(bed, "torn-") == (4, 4), timeout=90
    )
    took = time.monotonic() - frozen
    wait_for("the gang created after the kill bound", lambda: _bound_in(bed, "after-") == (2, 2), timeout=60)
    print(
        f"froze the leader ({leader}) with 2 of the gang bound; the standby bound the rest {took:.1f}s later"
    )
    assert _binders(bed, "torn-", 2) == {leader: 0, standby: 2}, "the test bound two, the standby the rest"
    assert _binders(bed, "after-", 2) == {leader: 0, standby: 2}
    placed = {
        p["metadata"]["name"]: p["spec"]["nodeName"]
        for p in list_pods(http, SIDECAR_NS)
        if p["metadata"]["name"].startswith("torn-")
    }
    assert {name: plan.partition(":")[0] for name, plan in plans.items()} == placed, "bound where planned"
    assert double_booked(list_pods(http)) == []
