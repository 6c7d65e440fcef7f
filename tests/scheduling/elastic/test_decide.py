"""The one elastic decision both drivers call: what it hands each of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

from scheduling.cluster.promises import PromiseBook
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.cluster.statement import Statement
from scheduling.elastic import ElasticJob, ElasticSettings
from scheduling.elastic.decide import ElasticDecision, ElasticRound, decide_elastic, may_shrink
from scheduling.elastic.pinning import choose_pins
from scheduling.elastic.throughput import Sample, fit
from scheduling.gang.gang_planner import GangPlan, plan_gang
from scheduling.model import QUEUE_LABEL, Pod, PodGroup, Resources
from scheduling.queues.view import view_of
from scheduling.topology import TopologyCache
from tests.builders import a_node, a_pod, snapshot_of
from tests.scheduling.elastic.builders import a_job
from tests.scheduling.queues.builders import gpu_queue

NODES = [a_node(f"n{i}").gpus(8).build() for i in range(1, 3)]


def facts(jobs: list[ElasticJob], **more: object) -> ElasticRound:
    pods = [p for job in jobs for p in job.workers]
    base = ElasticRound(jobs, snapshot_of(NODES, pods), None, 100.0, {}, ElasticSettings(), TopologyCache())
    return replace(base, **more)  # type: ignore[arg-type]


def test_may_shrink_names_each_job_above_its_minimum_and_by_how_much() -> None:
    above = a_job("above", ["n1"] * 4, low=1, high=8)
    at = a_job("at", ["n2"] * 2, low=2, high=8)
    assert may_shrink([at, above]) == {"ml/above": 3}
    decision = decide_elastic(facts([above, at]))
    assert decision.may_shrink == {"ml/above": 3}
    assert decision.shrinking == frozenset({"ml/above"})


def test_the_decision_pins_waiting_workers_where_its_layout_puts_them() -> None:
    job = a_job("grow", ["n1", None, None], low=1, high=3, gpus=2)
    decision = decide_elastic(facts([job]))
    assert decision.pins == {"ml/grow": choose_pins(decision.layout.targets["ml/grow"], job.workers)}
    assert [node for _, node in decision.pins["ml/grow"]] == ["n1", "n1"]
    assert decision.stale_pins == {}


def test_the_pool_and_the_sizes_come_with_the_plan() -> None:
    fast = a_job("fast", ["n1"], low=1, high=8, gpus=2)
    slow = a_job("slow", ["n2"], low=1, high=8, gpus=2)
    models = {
        "ml/fast": fit([Sample(1, 1, 10.0), Sample(4, 1, 40.0)]),
        "ml/slow": fit([Sample(1, 1, 10.0), Sample(4, 1, 11.0)]),
    }
    decision = decide_elastic(facts([fast, slow], models=models))
    assert decision.pool_gpus == 16
    assert decision.size_of(fast) > decision.size_of(slow)
    even = decide_elastic(facts([fast, slow], models=models, settings=ElasticSettings(sizing="even")))
    assert even.size_of(fast) == even.size_of(slow) == 4


def test_a_waiting_gang_gets_room_in_its_shape_not_only_its_count() -> None:
    """An elastic job fills three 8-GPU nodes (4 workers of 2 GPUs each); a gang of 3 x 6 GPUs waits.

    Shrinking to 3 workers keeps indices 0-2, all on n1: packed there they would leave 2 + 8 + 8 GPUs
    free, and the gang would wait for ever. The layout keeps 6 GPUs free on each node for the gang and
    moves the two workers in its way at once; applied, the gang's own planner places it.
    """
    nodes = [a_node(f"n{i}").gpus(8).build() for i in range(1, 4)]
    job = a_job("fill", ["n1"] * 4 + ["n2"] * 4 + ["n3"] * 4, low=1, high=12, gpus=2)
    gang = [a_pod(f"gang-{i}").gpus(6).group("gang").gated().build() for i in range(3)]
    snapshot = snapshot_of(nodes, [*job.workers, *gang], [PodGroup("ml", "gang", 3)])
    view = view_of(snapshot, PromiseBook())
    decision = decide_elastic(replace(facts([job]), snapshot=snapshot, view=view))
    assert decision.size_of(job) == 3
    assert decision.layout.targets["ml/fill"] == {"n1": 1, "n2": 1, "n3": 1}
    moves = [(m.pod, m.source, m.target) for m in decision.plan.migrations]
    assert moves == [("ml/fill-worker-2", "n1", "n2"), ("ml/fill-worker-1", "n1", "n3")], moves
    assert "to make room on n1 for a waiting gang" in decision.plan.migrations[0].reason
    _assert_the_gang_fits_once_applied(decision, job, gang, snapshot)


def _assert_the_gang_fits_once_applied(
    decision: ElasticDecision, job: ElasticJob, gang: Sequence[Pod], snapshot: ClusterSnapshot
) -> None:
    """Applied (the job shrunk to 3, its moves made), the gang's own planner places the gang."""
    applied = Statement(snapshot)
    for pod in job.workers[3:]:
        applied.evict(pod)
    for move in decision.plan.migrations:
        pod = next(p for p in job.workers if p.key == move.pod)
        applied.move(pod, move.target, move.gpus)
    plan = plan_gang(
        "ml/gang", gang, ["n1", "n2", "n3"], snapshot, PromiseBook(), TopologyCache(), statement=applied
    )
    assert isinstance(plan, GangPlan), plan


def _two_jobs_and_a_waiting_gang(a_on: list[str], b_on: list[str]) -> ElasticRound:
    """Jobs ``a`` (on n1) and ``b`` (on n2), 2-GPU workers; an 8-GPU gang waits for one node."""
    a = a_job("a", a_on, low=1, high=8, gpus=2)
    b = a_job("b", b_on, low=1, high=8, gpus=2)
    gang = a_pod("gang-0").gpus(8).group("gang").gated().build()
    snapshot = snapshot_of(NODES, [*a.workers, *b.workers, gang], [PodGroup("ml", "gang", 1)])
    return replace(facts([a, b]), snapshot=snapshot, view=view_of(snapshot, PromiseBook()))


def test_jobs_resized_for_a_waiting_gang_are_not_resized_again_while_it_waits() -> None:
    """Decide the target once, move once: the second round learned that ``a`` scales and ``b`` does not.

    Both jobs shrank for the gang (4 -> 2 each); before the gang binds, samples at the new sizes changed
    the models. Trading workers now (a 2 -> 3, b 2 -> 1) would restart both jobs a second time for a
    gang that has not even bound: the jobs hold their sizes until it binds or leaves, or
    ``hold_seconds`` pass.
    """
    first = decide_elastic(_two_jobs_and_a_waiting_gang(["n1"] * 4, ["n2"] * 4))
    assert sorted((r.job, r.before, r.after) for r in first.plan.resizes) == [("ml/a", 4, 2), ("ml/b", 4, 2)]
    assert sorted(first.holds) == ["ml/a", "ml/b"]
    learned = {
        "ml/a": fit([Sample(1, 1, 10.0), Sample(4, 1, 40.0)]),
        "ml/b": fit([Sample(1, 1, 10.0), Sample(2, 1, 10.5)]),  # a second worker adds 5%
    }
    second = replace(_two_jobs_and_a_waiting_gang(["n1"] * 2, ["n2"] * 2), models=learned, now=101.0)
    assert decide_elastic(second).plan.resizes, "without the hold, the new models trade workers"
    held = decide_elastic(replace(second, holds=first.holds))
    assert held.plan.resizes == (), "held while the gang waits"
    assert held.holds == first.holds, "the hold is carried, not renewed"
    timeout = ElasticSettings().hold_seconds
    late = decide_elastic(replace(second, holds=first.holds, now=100.0 + timeout))  # held at 100 s
    assert late.plan.resizes, "a hold is bounded: the gang may never bind"
    gone = _two_jobs_and_a_waiting_gang(["n1"] * 2, ["n2"] * 2)
    bound = snapshot_of(NODES, [p for j in gone.jobs for p in j.workers])  # the gang left (or bound)
    after = replace(
        gone, snapshot=bound, view=view_of(bound, PromiseBook()), models=learned, holds=first.holds
    )
    assert decide_elastic(after).holds == {} and decide_elastic(after).plan.resizes


def two_queues(ea: Sequence[str | None], eb: Sequence[str | None], *, leaving: int = 0) -> ElasticRound:
    """``ea`` (queue qa) and ``eb`` (queue qb), quotas 12 and 12 on three 8-GPU nodes.

    ``leaving``: how many of ``ea``'s highest workers are being deleted (a shrink the operator is doing).
    """
    nodes = [a_node(f"n{i}").gpus(8).build() for i in range(1, 4)]
    jobs = [a_job("ea", ea, queue="qa", high=12), a_job("eb", eb, queue="qb", high=12)]
    pods = []
    for job in jobs:
        for index, pod in enumerate(job.workers):
            pod = replace(pod, labels=MappingProxyType({**pod.labels, QUEUE_LABEL: job.queue}))
            gone = job.key == "ml/ea" and index >= len(job.workers) - leaving
            pods.append(replace(pod, terminating=True) if gone else pod)
    jobs = [
        replace(
            job,
            workers=tuple(p for p in pods if p.group == job.key.split("/")[1]),
            replicas=len(job.workers) - (leaving if job.key == "ml/ea" else 0),
        )
        for job in jobs
    ]
    snapshot = snapshot_of(nodes, pods, queues=[gpu_queue("qa", 12), gpu_queue("qb", 12)])
    view = view_of(snapshot, PromiseBook())
    return ElasticRound(jobs, snapshot, view, 100.0, {}, ElasticSettings(), TopologyCache())


def test_two_queues_split_the_pool_by_their_fair_shares_once_whatever_the_resize_in_flight() -> None:
    """Decide the target once: the sizes do not depend on how far the last resize has got.

    The queues' deficits are taken with every elastic job at its minimum, the division then gives the
    rest; taken from what the jobs hold now, a shrink still under way (its workers terminating) or a
    grow not yet running moved the targets again (seen on the test bed: 12 -> 6 -> 3 -> 6).
    """
    full = ["n1"] * 4 + ["n2"] * 4 + ["n3"] * 4
    states = {
        "eb arrives": two_queues(full, [None]),
        "ea shrinking, eb growing": two_queues(full, [None] * 6, leaving=6),
        "settled": two_queues(full[:6], ["n2", "n2", "n3", "n3", "n3", "n3"]),
    }
    sizes = {
        name: {job.key: decide_elastic(state).size_of(job) for job in state.jobs}
        for name, state in states.items()
    }
    assert all(size == {"ml/ea": 6, "ml/eb": 6} for size in sizes.values()), sizes


def test_a_gang_planned_on_gpus_a_kept_worker_holds_still_gets_its_room_and_the_round_goes_on() -> None:
    """The kept workers (indices 0-2) hold n1's GPUs 0-3 and n2's GPUs 0-1; a gang of 3 x 6 GPUs waits.

    Around them it fits nowhere (n1 keeps 4 free), so it is planned with every elastic worker gone, on
    GPUs 0-5 of each node. n2 has 6 GPUs free around its kept worker, but not GPUs 0-5: the room is
    still kept there (the worker in its way moves), and the round is planned rather than failing, as it
    did on the real control plane, round after round, while the gang waited.
    """
    nodes = [a_node(f"n{i}").gpus(8).build() for i in range(1, 4)]
    on = [("n2", (0, 1)), ("n1", (0, 1)), ("n1", (2, 3)), ("n1", (4, 5)), ("n1", (6, 7))]
    on += [("n2", (i, i + 1)) for i in (2, 4, 6)] + [("n3", (i, i + 1)) for i in (0, 2, 4, 6)]
    workers = tuple(
        a_pod(f"fill-worker-{i}").gpus(2).group("fill").on(node, gpus).build()
        for i, (node, gpus) in enumerate(on)
    )
    job = ElasticJob("ml/fill", "q", 1, 12, Resources(gpus=2), workers, "fill")
    gang = [a_pod(f"gang-{i}").gpus(6).group("gang").gated().build() for i in range(3)]
    snapshot = snapshot_of(nodes, [*job.workers, *gang], [PodGroup("ml", "gang", 3)])
    decision = decide_elastic(replace(facts([job]), snapshot=snapshot, view=view_of(snapshot, PromiseBook())))
    assert decision.size_of(job) == 3
    assert decision.layout.targets["ml/fill"] == {"n1": 1, "n2": 1, "n3": 1}
    _assert_the_gang_fits_once_applied(decision, job, gang, snapshot)
