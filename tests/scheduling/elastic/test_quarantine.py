"""A fault in one job's planning quarantines that job; the round is decided for the others.

The decision is the real ``decide_elastic``; only the fault is staged, by a decide that raises while
the jobs named to it are all in the round (a job's own content, or two jobs meeting).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.elastic import ElasticJob, ElasticSettings
from scheduling.elastic.decide import ElasticDecision, ElasticRound, decide_elastic
from scheduling.elastic.quarantine import Decide, decide_quarantining, describe_fault
from scheduling.topology import TopologyCache
from tests.builders import a_node, snapshot_of
from tests.scheduling.elastic.builders import a_job

NODES = [a_node(f"n{i}").gpus(8).build() for i in range(1, 4)]


def a_round(jobs: list[ElasticJob]) -> ElasticRound:
    pods = [p for job in jobs for p in job.workers]
    return ElasticRound(jobs, snapshot_of(NODES, pods), None, 100.0, {}, ElasticSettings(), TopologyCache())


def failing_while(*together: str) -> Decide:
    """``decide_elastic``, but raising while every job of ``together`` is in the round."""

    def decide(facts: ElasticRound) -> ElasticDecision:
        keys = {job.key for job in facts.jobs}
        if set(together) <= keys:
            msg = f"{' and '.join(together)} do not fit node n2 with GPUs [0, 1] in this plan"
            raise ValueError(msg)
        return decide_elastic(facts)

    return decide


# Three jobs on three nodes, each able to grow: a at its minimum on n1, b above it on n2, c on n3.
JOBS = [
    a_job("a", ["n1"], low=1, high=4),
    a_job("b", ["n2", "n2", "n2"], low=1, high=4),
    a_job("c", ["n3"], low=1, high=4),
]


@pytest.mark.parametrize(
    ("together", "quarantined"),
    [
        pytest.param(("ml/b",), {"ml/b"}, id="one job's own fault: that job"),
        pytest.param(("ml/a", "ml/c"), {"ml/a"}, id="two jobs meeting: the first by key whose absence helps"),
        pytest.param((), {"ml/a", "ml/b", "ml/c"}, id="no job's absence helps: every job"),
    ],
)
def test_the_round_is_decided_without_the_jobs_whose_planning_raises(
    together: tuple[str, ...], quarantined: set[str]
) -> None:
    facts = a_round(JOBS)
    if not together:  # raises with any job in the round, not with none
        contained = decide_quarantining(facts, _raising_with_any_job)
    else:
        contained = decide_quarantining(facts, failing_while(*together))
    assert set(contained.faults) == quarantined
    assert all(isinstance(fault, ValueError) for fault in contained.faults.values())
    others = [job for job in JOBS if job.key not in quarantined]
    assert contained.decision == decide_elastic(replace(facts, jobs=others)), "exactly the round without them"
    decided = {r.job for r in contained.decision.plan.resizes} | set(contained.decision.layout.targets)
    assert not decided & quarantined, "a quarantined job is neither resized nor laid out"
    assert not set(contained.decision.may_shrink) & quarantined, "reclaim does not wait for its shrink"
    if others:
        grown = {r.job for r in contained.decision.plan.resizes if r.after > r.before}
        assert grown == {job.key for job in others}, "the others still grow into their nodes' room"


def _raising_with_any_job(facts: ElasticRound) -> ElasticDecision:
    if facts.jobs:
        msg = "every job raises"
        raise ValueError(msg)
    return decide_elastic(facts)


def test_a_round_without_a_fault_is_the_round_itself() -> None:
    facts = a_round(JOBS)
    contained = decide_quarantining(facts, failing_while("ml/not-here"))
    assert contained.faults == {}
    assert contained.decision == decide_elastic(facts)


def test_a_fault_that_is_no_job_s_goes_to_the_caller() -> None:
    def always(_facts: ElasticRound) -> ElasticDecision:
        msg = "the snapshot itself"
        raise RuntimeError(msg)

    with pytest.raises(RuntimeError, match="the snapshot itself"):
        decide_quarantining(a_round(JOBS), always)


def test_the_warning_says_what_raised_what_the_job_keeps_and_keeps_a_long_cause_short() -> None:
    told = describe_fault("ml/b", 3, ValueError("x" * 5000))
    assert told.startswith("MPIJob ml/b: phalanx could not plan it this round (ValueError: xxx")
    assert "keeps its 3 workers where they run" in told
    assert "the other elastic jobs are planned without it" in told
    assert len(told) < 600
