from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scheduling.model import Resources
from scheduling.queues.queue_tree import Queue, ResourceQuota
from scheduling.queues.rules import QueueRule, check_rules
from scheduling.queues.workloads import PendingGroup
from tests.scheduling.queues.builders import gpu_queue, gpus, group, states_for


@dataclass(frozen=True)
class Case:
    name: str
    job: PendingGroup
    queues: tuple[Queue, ...]
    allocated: dict[str, int] = field(default_factory=dict)
    non_preemptible: dict[str, int] = field(default_factory=dict)
    ahead: tuple[PendingGroup, ...] = ()
    free: Resources | None = None
    rule: QueueRule | None = None
    reason: str = ""


ORG = (
    gpu_queue("org", 8, limit=10),
    gpu_queue("team-a", 4, parent="org"),
    gpu_queue("team-b", 4, parent="org"),
)

CASES = [
    Case(
        "within the limit",
        group("a", "team-a", 4),
        (gpu_queue("team-a", 8, limit=16),),
        allocated={"team-a": 12},
        reason="queue team-a: admitted",
    ),
    Case(
        "over the queue's limit",
        group("a", "team-a", 8),
        (gpu_queue("team-a", 8, limit=16),),
        allocated={"team-a": 12},
        rule=QueueRule.LIMIT,
        reason="queue team-a: over its GPU limit (limit 16, allocated 12, this job needs 8)",
    ),
    Case(
        "over the parent's limit",
        group("a", "team-a", 4),
        ORG,
        allocated={"team-a": 4, "team-b": 4},
        rule=QueueRule.LIMIT,
        reason="queue team-a: over its parent org's GPU limit (limit 10, allocated 8, this job needs 4)",
    ),
    Case(
        "non-preemptible beyond the quota",
        group("a", "team-a", 4, priority=100, preemptible=False),
        (gpu_queue("team-a", 8),),
        allocated={"team-a": 6},
        non_preemptible={"team-a": 6},
        rule=QueueRule.NON_PREEMPTIBLE_QUOTA,
        reason="queue team-a: non-preemptible jobs run only within the queue's quota "
        "(GPU quota 8, 6 held by non-preemptible jobs, this job needs 4)",
    ),
    Case(
        "non-preemptible within the quota while preemptible work borrows",
        group("a", "team-a", 4, priority=100, preemptible=False),
        (gpu_queue("team-a", 8),),
        allocated={"team-a": 20},
        non_preemptible={"team-a": 2},
        reason="queue team-a: admitted",
    ),
    Case(
        "preemptible work may go over quota",
        group("a", "team-a", 8),
        (gpu_queue("team-a", 8),),
        allocated={"team-a": 20},
        reason="queue team-a: admitted",
    ),
    Case(
        "free GPUs are held for a group ahead",
        group("b", "team-b", 8),
        (gpu_queue("team-a", 8), gpu_queue("team-b", 8)),
        ahead=(group("big", "team-a", 8),),
        free=gpus(8),
        rule=QueueRule.HELD_FOR_AHEAD,
        reason="queue team-b: the 8 GPUs free are needed by 1 group(s) ahead of this one "
        "(ml/big of queue team-a need 8); this job needs 8",
    ),
    Case(
        "long lists of groups ahead are cut",
        group("b", "team-b", 2),
        (gpu_queue("team-a", 8), gpu_queue("team-b", 8)),
        ahead=tuple(group(f"a{i}", "team-a", 1) for i in range(5)),
        free=gpus(6),
        rule=QueueRule.HELD_FOR_AHEAD,
        reason="queue team-b: the 6 GPUs free are needed by 5 group(s) ahead of this one "
        "(ml/a0 of queue team-a, ml/a1 of queue team-a, ml/a2 of queue team-a and 2 more need 5); "
        "this job needs 2",
    ),
    Case(
        "room for the groups ahead and this one",
        group("b", "team-b", 8),
        (gpu_queue("team-a", 8), gpu_queue("team-b", 8)),
        ahead=(group("big", "team-a", 8),),
        free=gpus(16),
        reason="queue team-b: admitted",
    ),
    Case(
        "too big for the free GPUs anyway: placement says why, not admission",
        group("b", "team-b", 16),
        (gpu_queue("team-a", 8), gpu_queue("team-b", 8)),
        ahead=(group("big", "team-a", 8),),
        free=gpus(8),
        reason="queue team-b: admitted",
    ),
    Case(
        "without the free capacity the ahead rule is skipped",
        group("b", "team-b", 8),
        (gpu_queue("team-a", 8), gpu_queue("team-b", 8)),
        ahead=(group("big", "team-a", 8),),
        reason="queue team-b: admitted",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_admit(case: Case) -> None:
    states = states_for(list(case.queues), 64, {}, case.allocated, case.non_preemptible)
    result = check_rules(case.job, states[case.job.queue], case.ahead, free=case.free)
    assert result.ok is (case.rule is None)
    assert result.rule is case.rule
    assert result.reason == case.reason


def test_a_group_held_for_the_groups_ahead_names_every_one_needing_the_resource() -> None:
    ahead = (
        group("a0", "team-a", 1),
        group("cpu-only", "team-a", 0),
        *(group(f"a{i}", "team-a", 1) for i in (1, 2, 3)),
    )
    states = states_for([gpu_queue("team-a", 8), gpu_queue("team-b", 8)], 64, {}, {})
    result = check_rules(group("b", "team-b", 2), states["team-b"], ahead, free=gpus(5))
    assert result.ahead == ("ml/a0", "ml/a1", "ml/a2", "ml/a3")


def test_cpu_limits_read_in_cores() -> None:
    states = states_for([Queue("team-a", cpu=ResourceQuota(0, 1, 4000))], 64, {}, {})
    job = PendingGroup("ml/a", "team-a", Resources(milli_cpu=4500))
    assert check_rules(job, states["team-a"]).reason == (
        "queue team-a: over its CPU limit (limit 4, allocated 0, this job needs 4500m)"
    )


def test_the_state_must_be_the_groups_queue() -> None:
    states = states_for([gpu_queue("team-a"), gpu_queue("team-b")], 8, {}, {})
    with pytest.raises(ValueError, match="group ml/a is in queue team-a, not team-b"):
        check_rules(group("a", "team-a", 1), states["team-b"])
