"""The release pass's driver: ungate in the decided order, keep the book, tell waiting groups why.

The decisions themselves are the core's (tests/scheduling/admission/test_release.py); here an in-memory
cluster and an ungater that can refuse a pod check what the driver does with them. The API server
calling the webhook and the pass releasing real pods is tested end to end in
tests/e2e/test_admission_gates.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import pytest

from kubeio.convert import parse_plan
from kubeio.errors import KubeError
from kubeio.plan_seal import SEAL_ANNOTATION, PlanSeal
from kubeio.render import PLAN_GANG_ANNOTATION
from placement.release_loop import LoopTiming, run_release_loop
from placement.release_pass import (
    ARRIVING_SECONDS,
    MAX_ARRIVING,
    WAITING_EVENT_AFTER,
    WAITING_EVENT_EVERY,
    ReleasePass,
    ReleaseReport,
)
from placement.webhook import GateWebhook
from scheduling.admission.release import GateSettings
from scheduling.model import ADMISSION_GATE, GATE_STAMP, PLAN_ANNOTATION, Pod
from scheduling.timestamps import seconds
from scheduling.topology import TopologyCache
from tests.builders import (
    FakeAnnotator,
    FakeClock,
    FakeCluster,
    FakeEvents,
    FakeNominator,
    a_gang,
    a_node,
    a_pod,
)
from tests.kubeio.test_webhook_review import WORKER, review
from tests.placement.test_webhook import answer

T0 = "2026-01-01T00:00:00Z"
START = (seconds(T0) or 0.0) + 10.0


@dataclass
class FakeUngater:
    """Ungates pods in the fake cluster, refusing those named in ``refuse``; keeps the order of calls."""

    cluster: FakeCluster
    refuse: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)

    written: dict[str, dict[str, str]] = field(default_factory=dict)

    def ungate(self, pod: Pod, annotations: Mapping[str, str] = MappingProxyType({})) -> bool:
        self.calls.append(pod.key)
        if pod.key in self.refuse:
            return False
        if annotations:
            self.written[pod.key] = dict(annotations)
        plan = parse_plan(annotations.get(PLAN_ANNOTATION)) or pod.plan
        ungated = tuple(g for g in pod.gates if g != ADMISSION_GATE)
        self.cluster.pods[pod.key] = replace(pod, gates=ungated, plan=plan)
        return True


SEAL = PlanSeal(b"a test plan key of thirty-two bytes")
"""The plan key of a pass that carries plans on pods: each plan it writes is sealed (kubeio.plan_seal)."""


def sealed(pod: str, plan: str, at: float) -> dict[str, str]:
    """A plan as the pass must write it at ``at``: the plan, and its seal by the test key."""
    return {PLAN_ANNOTATION: plan, SEAL_ANNOTATION: SEAL.seal(pod, plan, at)}


def bed(
    *pods: Pod, groups: tuple[object, ...] = (), settings: GateSettings | None = None
) -> tuple[ReleasePass, FakeCluster, FakeUngater, FakeEvents, FakeClock]:
    cluster = FakeCluster().add(a_node("n1").build(), *pods)
    for group in groups:
        cluster.add(group)  # type: ignore[arg-type]
    ungater, events, clock = FakeUngater(cluster), FakeEvents(), FakeClock(START)
    releaser = ReleasePass(
        cluster,
        ungater,
        events,
        clock=clock,
        topologies=TopologyCache(),
        settings=settings or GateSettings(),
        timer=lambda: 0.0,
        seal=SEAL if settings and settings.plan_on_pod else None,
    )
    return releaser, cluster, ungater, events, clock


def gated(name: str, gpus: int, *, group: str | None = None) -> Pod:
    builder = a_pod(name).gpus(gpus).created(T0).gated()
    return (builder.group(group) if group else builder).build()


def test_pods_released_at_once_are_ungated_without_an_event_and_a_gang_gets_one_on_its_podgroup() -> None:
    members = [gated(f"g-{i}", 2, group="g") for i in range(2)]
    releaser, cluster, ungater, events, _ = bed(
        gated("a", 2), gated("b", 2), *members, groups=(a_gang("g", 2),)
    )
    outcome = releaser.run()
    assert outcome == ReleaseReport(released=("ml/a", "ml/b", "ml/g"), kept=0, refused=(), in_flight_gpus=8)
    assert sorted(ungater.calls) == ["ml/a", "ml/b", "ml/g-0", "ml/g-1"]  # several groups at once
    assert not any(p.gated for p in cluster.pods.values())
    assert [(kind, name, reason) for kind, name, _, reason, _ in events.events] == [
        ("PodGroup", "g", "AdmissionReleased")
    ], "pods on their own were told nothing, so their release tells nothing either"
    assert events.events[0][4] == "released: queue default: admitted; fits now on 1 node(s) (n1)"


@pytest.mark.parametrize(
    ("from_nodes", "nominated"),
    [(1, ["ml/a", "ml/g-0", "ml/g-1"]), (2000, ["ml/g-0", "ml/g-1"])],
    ids=["every-placed-pod", "gang-members-only-below-2000-nodes"],
)
def test_each_placed_pod_is_nominated_to_its_planned_node_while_still_gated(
    from_nodes: int, nominated: list[str]
) -> None:
    members = [gated(f"g-{i}", 2, group="g") for i in range(2)]
    releaser, cluster, _, _, _ = bed(
        gated("a", 2),
        *members,
        groups=(a_gang("g", 2),),
        settings=GateSettings(nominate_from_nodes=from_nodes),
    )
    gated_then: dict[str, bool] = {}

    class Watching(FakeNominator):
        def nominate(self, namespace: str, name: str, uid: str, node: str | None) -> bool:
            group = [f"{namespace}/g-{i}" for i in range(2)] if name.startswith("g-") else []
            here = [f"{namespace}/{name}", *group]  # a gang's members: every one before the first ungate
            gated_then[f"{namespace}/{name}"] = all(cluster.pods[k].gated for k in here)
            return super().nominate(namespace, name, uid, node)

    nominator = Watching(cluster)
    releaser._nominator = nominator  # the composition root passes it as ``nominator=``
    releaser.run()
    assert sorted((key, node) for key, _, node in nominator.calls) == [(key, "n1") for key in nominated]
    assert gated_then == dict.fromkeys(nominated, True), "nominated before the ungate"
    assert not any(p.gated for p in cluster.pods.values())


def test_a_failed_nomination_still_ungates_the_pod() -> None:
    releaser, cluster, ungater, _, _ = bed(gated("a", 2), settings=GateSettings(nominate_from_nodes=0))
    nominator = FakeNominator(cluster, fail_with=KubeError(403, "Forbidden", "no pods/status patch"))
    releaser._nominator = nominator
    assert releaser.run().released == ("ml/a",)
    assert ungater.calls == ["ml/a"] and not cluster.pods["ml/a"].gated


def test_with_plans_carried_each_pod_gets_its_plan_in_its_ungate_and_a_broken_plan_is_rewritten() -> None:
    """The plan goes with the gate's removal (one write), and no nomination.

    Then GPUs 0-1 are taken by a pod bound meanwhile: the next pass plans the unbound pod again and
    writes the new plan.
    """
    releaser, cluster, ungater, events, _ = bed(
        gated("a", 2), settings=GateSettings(plan_on_pod=True, nominate_from_nodes=0)
    )
    nominator, annotator = FakeNominator(cluster), FakeAnnotator()
    releaser._nominator, releaser._annotator = nominator, annotator  # as the composition root passes them
    assert releaser.run().released == ("ml/a",)
    assert ungater.written == {"ml/a": sealed("ml/a", "n1:0,1", START)}
    assert nominator.calls == [], "a plan on the pod says more than a nomination"
    taken = a_pod("taker").gpus(2).on("n1", range(2)).created(T0).build()
    cluster.add(taken)
    releaser.run()
    written = {key: value for _, _, _, key, value in annotator.writes}
    assert written == sealed("ml/a", "n1:2,3", START), "the new plan and its seal, in one write"
    assert len({(ns, name, uid) for ns, name, uid, _, _ in annotator.writes}) == 1
    told = [(name, message) for _, name, _, reason, message in events.events if reason == "Replanned"]
    assert told == [
        (
            "a",
            "planned again on n1:2,3: its plan on n1 no longer held: a planned GPU or the room was taken"
            " since",
        )
    ]


def test_a_refused_patch_leaves_the_group_to_the_next_pass() -> None:
    releaser, cluster, ungater, events, _ = bed(
        *(gated(f"g-{i}", 2, group="g") for i in range(2)), groups=(a_gang("g", 2),)
    )
    ungater.refuse = {"ml/g-0"}
    outcome = releaser.run()
    assert (outcome.released, outcome.refused) == ((), ("ml/g",))
    assert ungater.calls == ["ml/g-0"], "the rest of the gang is not ungated after a refusal"
    # The event was written before the first patch (a crash after a patch must not lose it), so a
    # refused release has one too (the recorder does not repeat it when the next pass releases it).
    assert events.written_now == ["AdmissionReleased"]
    ungater.refuse = set()
    assert releaser.run().released == ("ml/g",)
    assert not any(p.gated for p in cluster.pods.values())


def test_a_kept_group_is_told_why_after_a_while_then_once_a_minute_and_when_it_goes() -> None:
    running = a_pod("running").gpus(4).on("n1", range(4)).created(T0).build()  # one node of 8 GPUs
    releaser, cluster, _, events, clock = bed(running, gated("big", 8))
    assert releaser.run().kept == 1
    assert events.events == [], "no sentence for a group kept only a moment"
    clock.now += WAITING_EVENT_AFTER
    releaser.run()
    clock.now += 1
    releaser.run()
    assert [m for *_, m in events.events] == [
        "kept gated: waits for room: needs 8 GPUs, 4 free after 0 group(s) ahead"
    ]
    clock.now += WAITING_EVENT_EVERY
    releaser.run()
    assert len(events.events) == 2
    cluster.pods.pop("ml/running")
    releaser.run()
    assert events.reasons()[-1] == "AdmissionReleased", "a pod told it waits is told it goes"


def test_a_group_kept_only_behind_the_pods_in_flight_is_told_after_a_minute_not_five_seconds() -> None:
    releaser, _, _, events, clock = bed(
        gated("first", 1), gated("second", 1), settings=GateSettings(max_unbound_pods=1, release_ttl=600.0)
    )
    assert releaser.run().released == ("ml/first",)  # unbound from now on: the budget is full
    clock.now += WAITING_EVENT_AFTER
    releaser.run()
    assert events.events == [], "in line behind a pod kube-scheduler is placing: nothing to tell yet"
    clock.now += WAITING_EVENT_EVERY
    releaser.run()
    assert [(name, reason) for _, name, _, reason, _ in events.events] == [("second", "AdmissionWaiting")]
    assert events.events[0][4].startswith("kept gated: waits its turn: "), events.events[0][4]


def test_the_gate_webhook_gates_only_pods_of_scheduler_phalanx_and_only_when_on() -> None:
    gated_count: list[int] = []
    on = GateWebhook(enabled=True, on_gate=lambda: gated_count.append(1))
    assert answer(on, review(WORKER)) == (
        200,
        [
            {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ADMISSION_GATE}]},
            {"op": "add", "path": "/metadata/annotations", "value": {GATE_STAMP: "answered"}},
        ],
    )
    other = json.loads(json.dumps(WORKER))
    other["spec"]["schedulerName"] = "default-scheduler"
    assert answer(on, review(other)) == (200, None)
    assert answer(GateWebhook(enabled=False), review(WORKER)) == (200, None)
    assert gated_count == [1]
    assert on.review(b"{}")[0] == 400


@dataclass
class CountingReleaser:
    passes: int = 0
    fail_first: bool = True
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> ReleaseReport:
        self.passes += 1
        if self.fail_first and self.passes == 1:
            msg = "boom"
            raise RuntimeError(msg)
        if self.passes >= 3:
            self.stop.set()
        return ReleaseReport(released=(f"p{self.passes}",))


def test_the_loop_runs_a_pass_per_wake_survives_a_failed_pass_and_never_while_standing_by() -> None:
    releaser = CountingReleaser()
    wake, seen = threading.Event(), list[str]()
    wake.set()
    leading = [False]

    def lead() -> bool:
        was = leading[0]
        leading[0] = True  # the first wake finds a standby; it leads from then on
        wake.set()
        return was

    run_release_loop(
        releaser,  # type: ignore[arg-type]
        wake,
        releaser.stop,
        leading=lead,
        clock=lambda: 0.0,
        on_pass=lambda outcome, _s: seen.extend(outcome.released),
        timing=LoopTiming(debounce=0.0, backstop=0.01),
    )
    assert releaser.passes == 3, "no pass while standing by; the failed pass did not end the loop"
    assert seen == ["p2", "p3"]


class RecordingStop(threading.Event):
    """A stop event whose waits are recorded, not slept."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return self.is_set()


def test_the_pause_after_a_pass_follows_the_time_spent_deciding_not_ungating() -> None:
    # Each pass decides in 10 ms and then waits 1 s on the API server to ungate: the next pass may
    # start after the pause for 10 ms of CPU, not for a second.
    now, stop, wake = [0.0], RecordingStop(), threading.Event()

    class SlowUngating:
        passes = 0

        def run(self) -> ReleaseReport:
            self.passes += 1
            now[0] += 1.0
            if self.passes == 2:
                stop.set()
            wake.set()
            return ReleaseReport(decide_seconds=0.01)

    wake.set()
    timing = LoopTiming(debounce=0.0, backstop=0.01)
    run_release_loop(
        SlowUngating(),  # type: ignore[arg-type]
        wake,
        stop,
        leading=lambda: True,
        clock=lambda: now[0],
        on_pass=lambda _o, _s: None,
        timing=timing,
    )
    assert stop.waits[1] == timing.pause(0.01) < timing.pause(1.0)


def test_a_kept_group_is_told_again_when_its_rule_changes_not_when_only_figures_do() -> None:
    running = a_pod("running").gpus(4).on("n1", range(4)).created(T0).build()  # one node of 8 GPUs
    releaser, cluster, _, events, clock = bed(running, gated("huge", 8))
    releaser.run()  # kept from now on
    clock.now += WAITING_EVENT_AFTER
    releaser.run()  # "waits for room: needs 8 GPUs, 4 free ..."
    cluster.add(a_pod("busy").gpus(2).on("n1", range(4, 6)).build())
    clock.now += 1
    releaser.run()  # the same sentence with other figures: not told again
    cluster.add(
        a_pod("huge").gpus(2).pinned("n9").created(T0).gated().build()
    )  # room in total, not on its node
    clock.now += 1
    releaser.run()
    told = [m for *_, m in events.events]
    assert told == [
        "kept gated: waits for room: needs 8 GPUs, 4 free after 0 group(s) ahead",
        "kept gated: waits for room on one node: no node has room for ml/huge now (2 GPUs)",
    ]


# -- the door: pods let in ungated as they are created ---------------------------------------------


def plain(name: str, gpus: int) -> dict[str, object]:
    """A pod of scheduler phalanx on its own, as a user creates it (no UID, no creation time yet)."""
    body: dict[str, object] = json.loads(json.dumps(WORKER))
    body["metadata"] = {"name": name}
    body["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = str(gpus)  # type: ignore[index]
    return body


def door_of(releaser: ReleasePass) -> GateWebhook:
    return GateWebhook(enabled=True, door=releaser.let_in)


def stored(name: str, gpus: int) -> Pod:
    """A pod let in at the door as the cache then shows it: stamped, ungated, unbound."""
    return replace(a_pod(name).gpus(gpus).created(T0).build(), gate_stamped=True)


def test_a_pod_the_pass_would_release_goes_in_ungated_and_is_told_nothing() -> None:
    releaser, cluster, _, events, _ = bed()
    status, ops = answer(door_of(releaser), review(plain("solo", 2)))
    assert (status, ops) == (
        200,
        [{"op": "add", "path": "/metadata/annotations", "value": {GATE_STAMP: "answered"}}],
    ), "stamped, so the bypass check knows the webhook answered, but not gated"
    cluster.add(stored("solo", 2))
    assert releaser.run().in_flight_gpus == 2, "the pass counts it in flight, from the cache now"
    assert events.events == [], "it never waited: kube-scheduler's Scheduled is its only event"


def test_a_pod_let_in_holds_its_room_at_the_door_and_in_the_pass_once_seen() -> None:
    releaser, cluster, _, _, _ = bed()  # one node of 8 GPUs
    webhook = door_of(releaser)
    assert answer(webhook, review(plain("first", 8)))[1] == [
        {"op": "add", "path": "/metadata/annotations", "value": {GATE_STAMP: "answered"}}
    ]
    second = answer(webhook, review(plain("second", 8)))[1] or []
    assert second[0]["path"] == "/spec/schedulingGates", "no room left: the cache has not seen the first yet"
    cluster.add(stored("first", 8), a_pod("second").gpus(8).created(T0).gated().build())
    outcome = releaser.run()
    assert (outcome.released, outcome.kept, outcome.in_flight_gpus) == ((), 1, 8), "the first is in flight"


def test_with_plans_carried_a_pod_let_in_goes_in_with_its_plan_and_the_next_one_plans_around_it() -> None:
    releaser, cluster, _, _, _ = bed(settings=GateSettings(plan_on_pod=True))  # one node of 8 GPUs
    webhook = door_of(releaser)
    first = answer(webhook, review(plain("first", 2)))[1]
    assert first == [
        {
            "op": "add",
            "path": "/metadata/annotations",
            "value": {GATE_STAMP: "answered", **sealed("ml/first", "n1:0,1", START)},
        }
    ], "let in with its plan, in the webhook's own patch: no write of the pass's"
    second = answer(webhook, review(plain("second", 2)))[1] or []
    plans = [op["value"][PLAN_ANNOTATION] for op in second]
    assert plans == ["n1:2,3"], "the first, not seen by the cache yet, keeps its GPUs at the door"
    cluster.add(
        replace(stored("first", 2), plan=("n1", (0, 1))), replace(stored("second", 2), plan=("n1", (2, 3)))
    )
    annotator = FakeAnnotator()
    releaser._annotator = annotator  # as the composition root passes it
    assert releaser.run().in_flight_gpus == 4
    assert annotator.writes == [], "both plans hold: nothing planned again"


def test_a_pod_let_in_and_never_stored_is_forgotten_after_a_few_seconds() -> None:
    releaser, _, _, events, clock = bed()
    webhook = door_of(releaser)
    assert len(answer(webhook, review(plain("ghost", 8)))[1] or []) == 1, "let in"
    assert (answer(webhook, review(plain("next", 8)))[1] or [])[0]["path"] == "/spec/schedulingGates"
    clock.now += ARRIVING_SECONDS + 1
    assert len(answer(webhook, review(plain("later", 8)))[1] or []) == 1, "the ghost holds nothing now"
    assert releaser.run().in_flight_gpus == 0, "the pass never counted it"
    assert events.events == []


def test_reviews_no_api_server_stored_fill_the_door_only_up_to_its_limit() -> None:
    releaser, _, _, _, _ = bed()
    webhook = door_of(releaser)
    let_in = [len(answer(webhook, review(plain(f"p{i}", 0)))[1] or []) == 1 for i in range(MAX_ARRIVING + 1)]
    assert let_in == [True] * MAX_ARRIVING + [False], "past the limit, pods are gated and the pass decides"


def test_a_pod_waits_gated_behind_a_group_the_pass_would_release_first() -> None:
    releaser, _, _, events, _ = bed(gated("early", 4))
    ops = answer(door_of(releaser), review(plain("late", 1)))[1] or []
    assert ops[0]["path"] == "/spec/schedulingGates", "the pass releases both, the older first"
    assert events.events == []


def test_a_dry_run_is_gated_and_leaves_nothing_behind() -> None:
    releaser, _, _, events, _ = bed()
    body = json.loads(review(plain("probe", 1)))
    body["request"]["dryRun"] = True
    ops = answer(door_of(releaser), json.dumps(body).encode())[1] or []
    assert ops[0]["path"] == "/spec/schedulingGates"
    assert events.events == []
    assert releaser.run().in_flight_gpus == 0, "nothing counted in flight for a pod never stored"


def test_a_door_that_fails_gates_the_pod() -> None:
    def broken(pod: Pod) -> Mapping[str, str] | None:
        raise RuntimeError(pod.key)

    ops = answer(GateWebhook(enabled=True, door=broken), review(plain("solo", 1)))[1] or []
    assert [op["path"] for op in ops] == ["/spec/schedulingGates", "/metadata/annotations"]


def test_with_plans_carried_a_gangs_pods_carry_its_barrier_and_a_pod_on_its_own_none() -> None:
    """The sidecar's Permit holds each member until the members planned together are all placed."""
    members = [gated(f"g-{i}", 2, group="g") for i in range(3)]
    releaser, _, ungater, _, _ = bed(
        gated("solo", 1), *members, groups=(a_gang("g", 3),), settings=GateSettings(plan_on_pod=True)
    )
    releaser.run()
    barriers = {pod: written.get(PLAN_GANG_ANNOTATION) for pod, written in ungater.written.items()}
    assert barriers == {"ml/solo": None, "ml/g-0": "3:g", "ml/g-1": "3:g", "ml/g-2": "3:g"}
    assert all(PLAN_ANNOTATION in written for written in ungater.written.values())
