"""The one elastic decision both drivers call: what it hands each of them."""

from __future__ import annotations

from dataclasses import replace

from scheduling.elastic import ElasticJob, ElasticSettings
from scheduling.elastic.decide import ElasticRound, decide_elastic, may_shrink
from scheduling.elastic.pinning import choose_pins
from scheduling.elastic.throughput import Sample, fit
from scheduling.topology import TopologyCache
from tests.builders import a_node, snapshot_of
from tests.scheduling.elastic.builders import a_job

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
