"""The elastic pass over in-memory fakes.

Taints follow the pool label, bad declarations are told once, jobs resize and move with events,
waiting workers are pinned to their layout, and a pass over the state the last one left repeats nothing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from types import MappingProxyType

import pytest

from kubeio.mpijob_pods import JOB_NAME_LABEL, ROLE_LABEL
from kubeio.mpijobs import MpiJob
from placement.elastic_pass import ElasticPass, ElasticReport
from placement.elastic_pool import POOL_LABEL
from scheduling.elastic import ElasticSettings
from scheduling.elastic.attained import Attained
from scheduling.elastic.decide import ElasticDecision, ElasticRound, decide_elastic
from scheduling.elastic.operator_lag import LAG_WAIT
from scheduling.elastic.quarantine import Decide
from scheduling.model import Pod, PodGroup, Resources
from scheduling.topology import TopologyCache
from tests.builders import FakeCluster, FakeEvents, a_node, a_pod, a_round
from tests.placement.fakes import FakeDeleter, FakeJobs, FakePins


def mpijob(name: str, replicas: int, *, low: int = 2, high: str | None = "4") -> MpiJob:
    return MpiJob("ml", name, f"uid-{name}", name, replicas, low + 1, high, Resources(gpus=2), None)


def worker(job: str, index: int, node: str | None = None) -> Pod:
    pod = a_pod(f"{job}-worker-{index}").gpus(2).group(job)  # the operator labels workers into its PodGroup
    built = (pod.on(node) if node else pod).build()
    labels = {
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/job-role": "worker",
        "training.kubeflow.org/replica-index": str(index),
    }
    return replace(built, labels=MappingProxyType(labels))


@dataclass
class Driven:
    """An elastic pass fed a round of the fakes each run; ``above_minimum`` is its last report's."""

    elastic: ElasticPass
    cluster: FakeCluster
    jobs: FakeJobs
    now: float
    above_minimum: frozenset[str] | None = None

    def run(self) -> ElasticReport:
        report = self.elastic.run(a_round(self.cluster, mpijobs=self.jobs.list(), now=self.now))
        self.above_minimum = report.above_minimum
        return report


def rig(
    cluster: FakeCluster,
    jobs: list[MpiJob],
    now: float = 100.0,
    cooldown: float = 0,
    decide: Decide = decide_elastic,
) -> tuple[Driven, FakeJobs, FakePins, FakeDeleter, FakeEvents]:
    fake_jobs, pins, deleter, events = FakeJobs(jobs), FakePins(cluster), FakeDeleter(cluster), FakeEvents()
    elastic = ElasticPass(
        fake_jobs,
        pins,
        deleter,
        events,
        clock=lambda: now,
        topologies=TopologyCache(),
        settings=ElasticSettings(cooldown_seconds=cooldown),
        decide=decide,
    )
    return Driven(elastic, cluster, fake_jobs, now), fake_jobs, pins, deleter, events


def test_pool_taints_follow_the_label_both_ways() -> None:
    cluster = FakeCluster().add(
        a_node("n1").labels(**{POOL_LABEL: "true"}).build(), replace(a_node("n2").build(), pin_taint=True)
    )
    reconciler, _, pins, _, _ = rig(cluster, [])
    assert reconciler.run().tainted == ("n1", "n2")
    assert pins.tainted == [("n1", True), ("n2", False)]
    assert reconciler.run().tainted == ()


def test_a_bad_declaration_is_told_once_and_the_job_left_alone() -> None:
    cluster = FakeCluster().add(a_node("n1").build())
    reconciler, jobs, _, _, events = rig(cluster, [mpijob("bad", 2, low=5, high="3")])
    for _ in range(2):
        assert reconciler.run().refused == ("ml/bad",)
    assert [e[3] for e in events.events] == ["InvalidElasticJob"]
    assert "min workers 5 (minAvailable 6 less the launcher) is above max workers 3" in events.events[0][4]
    assert jobs.resized == []


def test_a_job_alone_grows_to_its_max_and_its_new_workers_are_pinned_to_its_node() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(worker("mnist", 0, "n1"), worker("mnist", 1, "n1"))
    reconciler, jobs, pins, _, events = rig(cluster, [mpijob("mnist", 2)])
    first = reconciler.run()
    assert first.resized == ("ml/mnist",) and jobs.resized == [("ml/mnist", 4)]
    assert first.grown == 1
    assert reconciler.above_minimum == frozenset(), "at its minimum: reclaim may take it whole"
    assert jobs.plans == [("ml/mnist", '{"nodes":{"n1":4},"workers":4}')]
    assert jobs.writes == [("ml/mnist", 4, '{"nodes":{"n1":4},"workers":4}', None)], (
        "size and plan in one write: the webhook pins what the resize makes, and the operator wakes once"
    )
    assert events.events[0][:4] == ("MPIJob", "mnist", "Normal", "Resized")
    cluster.add(worker("mnist", 2), worker("mnist", 3))  # the operator creates the missing workers
    second = reconciler.run()
    assert second.resized == ()
    assert second.waiting == 2
    assert reconciler.above_minimum == {"ml/mnist"}, "above its minimum: it shrinks, reclaim leaves it"
    assert len(jobs.plans) == 1, "an unchanged plan is not written again"
    assert pins.pinned == [("ml/mnist-worker-2", "n1"), ("ml/mnist-worker-3", "n1")]
    assert reconciler.run().pinned == (), "a repeated pass pins nothing twice"


def test_a_spread_job_moves_one_worker_a_pass_and_its_replacement_is_pinned_where_it_goes() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build(), a_node("n3").build())
    cluster.add(
        worker("spread", 0, "n1"),
        worker("spread", 1, "n1"),
        worker("spread", 2, "n2"),
        worker("spread", 3, "n3"),
    )
    reconciler, _, pins, deleter, events = rig(cluster, [mpijob("spread", 4, high="4")])
    report = reconciler.run()
    assert report.moved == ("ml/spread-worker-3",)
    assert report.replacing == ("ml/spread",), "short until re-created: the gang pass is told"
    assert deleter.deleted == ["ml/spread-worker-3"]
    assert events.events[-1][3] == "Moved"
    cluster.add(worker("spread", 3))  # re-created by the operator, waiting
    after = reconciler.run()
    assert ("ml/spread-worker-3", "n1") in pins.pinned
    assert after.moved == ("ml/spread-worker-2",), "the next worker moves while the first replacement waits"


def test_the_pool_opens_to_waiting_phalanx_pods_that_are_no_pinned_workers() -> None:
    cluster = FakeCluster().add(replace(a_node("n1").labels(**{POOL_LABEL: "true"}).build(), pin_taint=True))
    launcher, other = (
        a_pod("mnist-launcher").build(),
        replace(a_pod("web").build(), scheduler_name="default-scheduler"),
    )
    cluster.add(launcher, other, worker("mnist", 0), a_pod("running").on("n1").build())
    reconciler, _, pins, _, _ = rig(cluster, [mpijob("mnist", 1, low=1)])
    assert reconciler.run().opened == ("ml/mnist-launcher",)
    assert reconciler.run().opened == ()
    assert pins.opened == ["ml/mnist-launcher"]


def test_new_workers_fill_the_node_holding_the_lower_indices_first() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(worker("mnist", 0, "n2"), worker("mnist", 1, "n2"))
    cluster.add(*(worker("mnist", i) for i in range(2, 6)))
    reconciler, _, pins, _, _ = rig(cluster, [mpijob("mnist", 6, high="6")])
    reconciler.run()
    assert pins.pinned == [
        ("ml/mnist-worker-2", "n2"),
        ("ml/mnist-worker-3", "n2"),
        ("ml/mnist-worker-4", "n1"),
        ("ml/mnist-worker-5", "n1"),
    ]


def test_a_worker_pinned_where_the_plan_has_no_place_now_is_deleted_to_come_back_pinned_anew() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(a_pod("urgent").gpus(8).on("n1").build())  # took n1 after the workers were pinned there
    stale = [replace(worker("mnist", i), pinned=frozenset({"n1"})) for i in (2, 3)]
    cluster.add(worker("mnist", 0, "n2"), worker("mnist", 1, "n2"), *stale)
    reconciler, _, _, deleter, events = rig(cluster, [mpijob("mnist", 4, high="4")])
    report = reconciler.run()
    assert report.repinned == ("ml/mnist-worker-2", "ml/mnist-worker-3")
    assert report.replacing == ("ml/mnist",)
    assert deleter.deleted == ["ml/mnist-worker-2", "ml/mnist-worker-3"]
    assert events.events[-1][3:] == (
        "Repinned",
        "deleted waiting mnist-worker-3, pinned to n1 where the plan of ml/mnist has no place for it now; "
        "its operator re-creates it, to be pinned to n2",
    )
    cluster.add(worker("mnist", 2), worker("mnist", 3))  # re-created by the operator
    again = reconciler.run()
    assert again.repinned == () and again.pinned == ("ml/mnist-worker-2", "ml/mnist-worker-3")


def test_the_moves_cooldown_is_read_back_from_the_mpijob_after_a_restart() -> None:
    def spread() -> FakeCluster:
        cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build(), a_node("n3").build())
        return cluster.add(
            worker("spread", 0, "n1"),
            worker("spread", 1, "n1"),
            worker("spread", 2, "n2"),
            worker("spread", 3, "n3"),
        )

    first, jobs, _, _, _ = rig(spread(), [mpijob("spread", 4, high="4")], now=1000.0, cooldown=60)
    assert first.run().moved == ("ml/spread-worker-3",)
    assert jobs.calls[-1] == "update" and jobs.jobs[0].moved_at == 1000.0, "written before the delete"
    for now, moved in ((1030.0, ()), (1061.0, ("ml/spread-worker-3",))):
        restarted, _, _, _, _ = rig(spread(), jobs.jobs, now=now, cooldown=60)  # a new process: no memory
        assert restarted.run().moved == moved, f"at {now}: the cooldown from the MPIJob"


HOSTILE = [
    replace(mpijob("superscript", 2), max_workers="²"),  # isdigit() says yes, int() says no
    replace(mpijob("digits", 2), max_workers="9" * 5000),  # more digits than int() converts
    replace(mpijob("no-gpu", 2, high="100000"), worker=Resources(milli_cpu=500)),
    replace(mpijob("unreadable", 2), problem="spec.mpiReplicaSpecs.Worker.replicas must be a whole number"),
]


def test_one_hostile_job_is_refused_with_its_reason_and_every_other_job_is_still_sized_and_pinned() -> None:
    def run(jobs: list[MpiJob]) -> tuple[list[tuple[str, int]], list[tuple[str, str]], FakeEvents]:
        cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
        cluster.add(worker("mnist", 0, "n1"), worker("mnist", 1, "n1"), worker("mnist", 2))
        for job in jobs:
            cluster.add(*(worker(job.name, i, "n2") for i in range(2)))
        reconciler, fake_jobs, pins, _, events = rig(cluster, [mpijob("mnist", 3), *jobs])
        reconciler.run()
        return fake_jobs.resized, pins.pinned, events

    alone = run([])
    for hostile in HOSTILE:
        resized, pinned, events = run([hostile])
        assert (resized, pinned) == alone[:2], hostile.name
        [told] = [e for e in events.events if e[1] == hostile.name]
        assert told[2:4] == ("Warning", "InvalidElasticJob")
        assert len(told[4]) < 300, "a 5,000-digit annotation is not echoed whole"
    assert ("ml/mnist", 4) in alone[0]


def _raising_with(key: str) -> Decide:
    def decide(facts: ElasticRound) -> ElasticDecision:
        if any(job.key == key for job in facts.jobs):
            msg = f"{key} does not fit node n2 with GPUs [0, 1] in this plan"
            raise ValueError(msg)
        return decide_elastic(facts)

    return decide


def test_a_job_whose_planning_raises_is_told_once_and_every_other_job_is_still_sized_and_pinned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def run(jobs: list[MpiJob], decide: Decide) -> tuple[Driven, FakeJobs, FakePins, FakeEvents]:
        cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
        cluster.add(worker("mnist", 0, "n1"), worker("mnist", 1, "n1"), worker("mnist", 2))
        for job in jobs:
            cluster.add(*(worker(job.name, i, "n2") for i in range(2)))
        reconciler, fake_jobs, pins, _, events = rig(cluster, [mpijob("mnist", 3), *jobs], decide=decide)
        return reconciler, fake_jobs, pins, events

    alone, alone_jobs, alone_pins, _ = run([], decide_elastic)
    alone.run()
    reconciler, jobs, pins, events = run([mpijob("faulty", 2)], _raising_with("ml/faulty"))
    with caplog.at_level(logging.ERROR, logger="placement.elastic_pass"):
        reports = [reconciler.run(), reconciler.run()]
    assert [r.quarantined for r in reports] == [("ml/faulty",), ("ml/faulty",)]
    assert (jobs.resized, pins.pinned) == (alone_jobs.resized, alone_pins.pinned), "as if it were not there"
    assert ("ml/mnist", 4) in jobs.resized
    [told] = [e for e in events.events if e[1] == "faulty"]
    assert told[2:4] == ("Warning", "ElasticPlanFailed")
    assert "(ValueError: ml/faulty does not fit node n2 with GPUs [0, 1] in this plan)" in told[4]
    assert "keeps its 2 workers where they run" in told[4]
    [logged] = [r for r in caplog.records if r.name == "placement.elastic_pass" and r.exc_info]
    assert logged.getMessage() == "ml/faulty: planned without it this round", "the traceback, once"
    assert reconciler.above_minimum is not None and "ml/faulty" not in reconciler.above_minimum


def test_a_job_the_compact_rule_keeps_from_growing_is_told_why_once() -> None:
    """Its node is full and the only free GPUs are two on n2: one more worker would spread it."""
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(a_pod("block-1").gpus(6).on("n1").build(), a_pod("block-2").gpus(6).on("n2").build())
    cluster.add(worker("grow", 0, "n1"))
    reconciler, jobs, pins, _, events = rig(cluster, [mpijob("grow", 1, low=1, high="4")])
    for _ in range(2):
        reconciler.run()
    assert (jobs.resized, pins.pinned) == ([], [])
    [told] = [e for e in events.events if e[3] == "GrowthHeld"]
    assert told[:3] == ("MPIJob", "grow", "Normal")
    assert told[4] == (
        "MPIJob ml/grow: not grown beyond 1 worker though GPUs are free: it grows on the fewest nodes "
        "(more would spread it, and it has not measured spreading free); the free GPUs are on other nodes"
    )


def test_a_max_the_cluster_could_never_hold_is_capped_with_an_event() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(worker("wide", 0, "n1"), worker("wide", 1, "n1"))
    reconciler, jobs, _, _, events = rig(cluster, [mpijob("wide", 2, high="100000")])
    reconciler.run()
    reconciler.run()
    assert jobs.resized == [("ml/wide", 8)], "16 GPUs hold 8 workers of 2"
    capped = [e for e in events.events if e[3] == "MaxWorkersCapped"]
    assert capped == [
        (
            "MPIJob",
            "wide",
            "Normal",
            "MaxWorkersCapped",
            "MPIJob ml/wide: max workers 100000 capped to 8: the cluster's 16 GPUs hold at most 8 workers "
            "of 2 GPUs",
        )
    ]


def report(rate: float, workers: int = 2) -> str:
    return f'{{"samplesPerSecond": {rate}, "workers": {workers}}}'


def launcher(job: str, progress: str | None) -> Pod:
    """The job's launcher pod, carrying ``progress`` as its reporting process wrote it."""
    labels = {JOB_NAME_LABEL: job, ROLE_LABEL: "launcher"}
    built = a_pod(f"{job}-launcher").on("n1").build()
    return replace(built, labels=MappingProxyType(labels), progress=progress)


def learning_cluster(**rates: float) -> FakeCluster:
    """``lin`` on n1 and ``flat`` on n2, 2 workers each; each job named reports its rate at 2 workers."""
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(*(launcher(job, report(rate)) for job, rate in rates.items()))
    return cluster.add(
        worker("lin", 0, "n1"), worker("lin", 1, "n1"), worker("flat", 0, "n2"), worker("flat", 1, "n2")
    )


def keeping(name: str, kept: str) -> MpiJob:
    return replace(mpijob(name, 2, low=1, high="8"), samples=kept)


def test_the_job_that_reports_it_scales_is_grown_and_the_event_names_the_model() -> None:
    jobs = [keeping("lin", "[[1,1,10.0]]"), keeping("flat", "[[1,1,10.0]]")]
    reconciler, fake_jobs, _, _, events = rig(learning_cluster(lin=20.0, flat=11.0), jobs)
    reconciler.run()
    sizes = dict(fake_jobs.resized)
    assert sizes["ml/lin"] > sizes.get("ml/flat", 2), sizes
    kept = {j.name: j.samples for j in fake_jobs.jobs}
    assert kept == {"lin": "[[1,1,10.0],[2,1,20.0]]", "flat": "[[1,1,10.0],[2,1,11.0]]"}
    assert fake_jobs.calls == ["update", "update"], "one write per job: samples, plan and size together"
    resized = [e[4] for e in events.events if e[3] == "Resized" and e[1] == "lin"]
    assert resized and "predicted speedup" in resized[0] and "fitted on 2 samples" in resized[0], resized


def test_a_restarted_manager_decides_the_same_from_the_samples_the_api_server_holds() -> None:
    jobs = [keeping("lin", "[[1,1,10.0]]"), keeping("flat", "[[1,1,10.0]]")]
    first, first_jobs, _, _, _ = rig(learning_cluster(lin=20.0, flat=11.0), jobs)
    first.run()
    held = [replace(j, replicas=2) for j in first_jobs.jobs]
    restarted, restarted_jobs, _, _, _ = rig(learning_cluster(), held)  # no report now: the samples only
    restarted.run()
    assert restarted_jobs.resized == first_jobs.resized


def test_a_report_that_cannot_be_read_is_told_once_naming_its_pod_and_the_job_sized_by_the_prior() -> None:
    cluster = learning_cluster().add(launcher("lin", "fast!"))
    jobs = [mpijob("lin", 2, low=1, high="8"), mpijob("flat", 2, low=1, high="8")]
    reconciler, fake_jobs, _, _, events = rig(cluster, jobs)
    reconciler.run()
    reconciler.run()
    warned = [e[4] for e in events.events if e[3] == "InvalidThroughputReport"]
    assert len(warned) == 1 and "on ml/lin-launcher" in warned[0] and "must be JSON" in warned[0], warned
    assert dict(fake_jobs.resized) == {"ml/lin": 4, "ml/flat": 4}, "no model: the prior, linear for both"


def test_a_report_on_the_mpijob_is_still_learned_and_the_job_told_once_to_write_it_on_its_pod() -> None:
    """The older place: a write there races the operator's status update (``kubeio.progress``)."""
    jobs = [replace(keeping("lin", "[[1,1,10.0]]"), throughput=report(20.0)), keeping("flat", "[[1,1,10.0]]")]
    reconciler, fake_jobs, _, _, events = rig(learning_cluster(), jobs)
    reconciler.run()
    reconciler.run()
    assert {j.name: j.samples for j in fake_jobs.jobs} == {
        "lin": "[[1,1,10.0],[2,1,20.0]]",
        "flat": "[[1,1,10.0]]",
    }
    told = [e for e in events.events if e[3] == "ThroughputReportOnMPIJob"]
    assert [e[1] for e in told] == ["lin"] and "write the report on the pod" in told[0][4], told


def test_a_report_on_a_pod_of_the_job_wins_over_one_left_on_the_mpijob() -> None:
    jobs = [replace(keeping("lin", "[[1,1,10.0]]"), throughput=report(11.0)), keeping("flat", "[[1,1,10.0]]")]
    reconciler, fake_jobs, _, _, events = rig(learning_cluster(lin=20.0), jobs)
    reconciler.run()
    assert {j.name: j.samples for j in fake_jobs.jobs}["lin"] == "[[1,1,10.0],[2,1,20.0]]"
    assert not [e for e in events.events if e[3] == "ThroughputReportOnMPIJob"]


def gang_waiting_beside(workers: int) -> FakeCluster:
    """``lin`` on n1 and ``flat`` on n2 with ``workers`` workers each; an 8-GPU gang waits for a node."""
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(*(worker("lin", i, "n1") for i in range(workers)))
    cluster.add(*(worker("flat", i, "n2") for i in range(workers)))
    return cluster.add(PodGroup("ml", "gang", 1), a_pod("gang-0").gpus(8).group("gang").gated().build())


def test_jobs_shrunk_for_a_waiting_gang_are_not_resized_again_by_what_they_report_while_it_waits() -> None:
    """The pass hands each decision's holds to the next: what is learned at the new sizes waits."""
    cluster = gang_waiting_beside(4)
    jobs = [mpijob("lin", 4, low=1, high="8"), mpijob("flat", 4, low=1, high="8")]
    reconciler, fake_jobs, _, _, _ = rig(cluster, jobs)
    reconciler.run()
    assert sorted(fake_jobs.resized) == [("ml/flat", 2), ("ml/lin", 2)], "both give the gang a node"
    reports = (launcher("lin", report(20.0)), launcher("flat", report(11.0)))  # lin scales, flat does not
    cluster.pods = gang_waiting_beside(2).add(*reports).pods  # the operator removed indices 2 and 3
    lin, flat = (replace(job, samples="[[1,1,10.0]]") for job in fake_jobs.jobs)
    fake_jobs.jobs = [lin, flat]
    reconciler.run()
    assert len(fake_jobs.resized) == 2, f"held while the gang waits: {fake_jobs.resized}"
    fresh, fresh_jobs, _, _, _ = rig(gang_waiting_beside(2).add(*reports), [lin, flat])  # no holds
    fresh.run()
    assert sorted(fresh_jobs.resized) == [("ml/flat", 1), ("ml/lin", 3)], (
        "without the hold, what was learned trades workers before the gang binds"
    )


def lagging_rig(
    active: int, events: FakeEvents | None = None
) -> tuple[ElasticPass, FakeCluster, FakeJobs, list[float]]:
    """A job of 2 running workers whose operator recorded ``active`` running; the pass's clock moves."""
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(worker("mnist", 0, "n1"), worker("mnist", 1, "n1"))
    jobs, clock = FakeJobs([replace(mpijob("mnist", 2), workers_active=active)]), [100.0]
    elastic = ElasticPass(
        jobs,
        FakePins(cluster),
        FakeDeleter(cluster),
        events or FakeEvents(),
        clock=lambda: clock[0],
        topologies=TopologyCache(),
        settings=ElasticSettings(cooldown_seconds=0),
    )
    return elastic, cluster, jobs, clock


def test_a_job_whose_operator_has_not_counted_its_running_workers_is_written_once_it_has() -> None:
    """A write landing during the operator's status update fails that sync and stalls the job."""
    elastic, cluster, jobs, clock = lagging_rig(active=1)
    assert elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0])).resized == ()
    clock[0] += 5
    assert elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0])).resized == ()
    assert jobs.writes == [], "held: the operator's next sync updates the status"
    jobs.jobs = [replace(job, workers_active=2) for job in jobs.jobs]  # its sync recorded both
    clock[0] += 1
    assert elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0])).resized == ("ml/mnist",)
    assert jobs.resized == [("ml/mnist", 4)]


def test_an_operator_that_never_catches_up_is_not_waited_for_longer_than_the_lag_wait() -> None:
    elastic, cluster, jobs, clock = lagging_rig(active=0)
    assert elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0])).resized == ()
    clock[0] += LAG_WAIT
    assert elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0])).resized == ("ml/mnist",)


def test_a_job_whose_operator_lags_past_the_wait_is_told_once_per_lag_that_it_may_be_stalled() -> None:
    events = FakeEvents()
    elastic, cluster, jobs, clock = lagging_rig(active=0, events=events)

    def lagging_warnings() -> list[str]:
        return [e[4] for e in events.events if e[3] == "OperatorLagging"]

    for step in (0, LAG_WAIT - 1, 1, 2):  # lagging 0, 9, 10 and 12 s
        clock[0] += step
        elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0]))
        assert len(lagging_warnings()) == (clock[0] - 100 >= LAG_WAIT), (clock[0], lagging_warnings())
    assert (
        "may be backing off" in lagging_warnings()[0] and "restarting the operator" in lagging_warnings()[0]
    )
    jobs.jobs = [replace(job, workers_active=2) for job in jobs.jobs]  # caught up: the lag ends
    elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0]))
    jobs.jobs = [replace(job, workers_active=0) for job in jobs.jobs]  # and lags again
    clock[0] += 1
    elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0]))
    clock[0] += LAG_WAIT
    elastic.run(a_round(cluster, mpijobs=jobs.list(), now=clock[0]))
    assert len(lagging_warnings()) == 2, "a new lag past the wait is told again"


def started(pod: Pod, at: float) -> Pod:
    return replace(pod, phase="Running", started_at=at)


def test_attained_service_is_kept_on_the_mpijob_and_a_restarted_manager_counts_on_from_it() -> None:
    """Every resize restarts the workers: the record keeps what the deleted ones had run."""
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(launcher("lin", report(20.0)), started(worker("lin", 0, "n1"), 0.0))
    cluster.add(started(worker("lin", 1, "n1"), 40.0))
    first, jobs, _, _, _ = rig(cluster, [keeping("lin", "[[1,1,10.0]]")], now=100.0)
    first.run()
    assert jobs.calls == ["update"] and jobs.jobs[0].attained == Attained(2 * 100 + 2 * 60, 100.0)

    # The resize restarted both workers at 130; a new process, at 160, sees only them and the record.
    restarted = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    restarted.add(launcher("lin", report(30.0, workers=4)))
    restarted.add(*(started(worker("lin", i, "n1" if i < 2 else "n2"), 130.0) for i in range(4)))
    second, again, _, _, _ = rig(restarted, jobs.jobs, now=160.0)
    second.run()
    assert again.calls == ["update"], "the new sample is written, with the service counted on"
    assert again.jobs[0].attained == Attained(320 + 4 * 2 * 30, 160.0)


def test_a_resize_event_names_the_attained_service_and_what_it_does_to_the_claim() -> None:
    cluster = FakeCluster().add(a_node("n1").build(), a_node("n2").build())
    cluster.add(started(worker("lin", 0, "n1"), 0.0), started(worker("lin", 1, "n1"), 0.0))
    job = replace(mpijob("lin", 2, low=1, high="4"), attained=Attained(90_000.0, 1000.0))
    reconciler, _, _, _, events = rig(cluster, [job], now=1000.0)
    reconciler.run()
    (resized,) = [e[4] for e in events.events if e[3] == "Resized"]
    said = (
        "; attained service 25.0 GPU-hours: a long job (20 GPU-hours or more), the oldest of 1: "
        "its claim on more workers counts 0.10x"
    )
    assert resized.endswith(said), resized
