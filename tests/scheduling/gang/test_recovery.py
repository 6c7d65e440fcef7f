from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from scheduling.cluster.promises import Promise, PromiseBook
from scheduling.gang.recovery import Recovery, RecoveryFacts, RecoveryKind, hold_plan, plan_recovery
from scheduling.model import Node, Pod
from scheduling.plan import Assignment, Plan
from tests.builders import a_node, a_pod, snapshot_of

PLAN = Plan(tuple(Assignment(f"ml/m{i}", f"uid-ml-m{i}", "n1", (i,)) for i in range(3)))


NO_PROMISES = PromiseBook()


def pod(i: int, *, bound: bool, phase: str = "Running") -> Pod:
    p = a_pod(f"m{i}").gpus(1).group("g").build()
    return replace(p, node_name="n1", gpu_indices=(i,), phase=phase) if bound else p


def recover(
    pods: Mapping[str, Pod],
    *,
    plan: Plan = PLAN,
    nodes: tuple[Node, ...] = (a_node("n1").gpus(8).build(),),
    others: tuple[Pod, ...] = (),
    promises: PromiseBook = NO_PROMISES,
    absent: Mapping[str, str] | None = None,
) -> Recovery:
    """Recovery of ``plan`` with the gang's ``pods`` and ``others`` in the cluster of ``nodes``."""
    snapshot = snapshot_of(nodes, [*pods.values(), *others])
    return plan_recovery(plan, pods, RecoveryFacts(snapshot, promises, absent or {}))


@pytest.mark.parametrize(
    ("pods", "bind", "delete"),
    [
        ({"m0": pod(0, bound=True), "m1": pod(1, bound=False), "m2": pod(2, bound=False)}, ["m1", "m2"], []),
        ({"m0": pod(0, bound=True), "m2": pod(2, bound=False)}, [], ["m0"]),
        ({"m0": pod(0, bound=True), "m1": pod(1, bound=True), "m2": pod(2, bound=True)}, [], []),
        ({"m0": pod(0, bound=True), "m1": pod(1, bound=True)}, [], []),
        (
            {"m0": pod(0, bound=False), "m1": pod(1, bound=False), "m2": pod(2, bound=False)},
            ["m0", "m1", "m2"],
            [],
        ),
        (
            {
                "m0": pod(0, bound=True, phase="Succeeded"),
                "m1": pod(1, bound=False),
                "m2": pod(2, bound=False),
            },
            ["m1", "m2"],
            [],
        ),
        (
            {"m0": pod(0, bound=True, phase="Failed"), "m1": pod(1, bound=True), "m2": pod(2, bound=False)},
            ["m2"],
            [],
        ),
        ({"m0": pod(0, bound=True, phase="Succeeded"), "m1": pod(1, bound=False)}, [], []),
    ],
    ids=[
        "half-bound, all there: complete",
        "half-bound, a member gone: roll back",
        "all bound: done",
        "all bound, one lost later: done (the placement manager's case)",
        "crash before the first Binding: complete",
        "the bound member finished since: complete",
        "a bound member failed since: complete",
        "a member gone, the bound one finished: nothing to delete, rolled back",
    ],
)
def test_recovery(pods: dict[str, Pod], bind: list[str], delete: list[str]) -> None:
    recovery = recover(pods)
    assert [a.pod.partition("/")[2] for a in recovery.bind] == bind
    assert [p.name for p in recovery.delete] == delete


def test_a_gang_that_cannot_be_completed_is_rolled_back_even_with_nothing_to_delete() -> None:
    """The defect: with no bound member still running, the plan was removed as if all was done."""
    pods = {"m0": pod(0, bound=True, phase="Succeeded"), "m1": pod(1, bound=False)}
    recovery = recover(pods)
    assert recovery.kind is RecoveryKind.ROLLED_BACK
    assert recovery.reason == (
        "the bind was interrupted and members m2 are gone, so the gang cannot be completed; deleting the "
        "0 bound member(s) still running; the 1 unbound member(s) wait for the gang to be whole again"
    )


def test_a_member_that_failed_before_it_was_bound_is_gone() -> None:
    pods = {
        "m0": pod(0, bound=True),
        "m1": replace(pod(1, bound=False), phase="Failed"),
        "m2": pod(2, bound=False),
    }
    recovery = recover(pods)
    assert (recovery.kind, [p.name for p in recovery.delete]) == (RecoveryKind.ROLLED_BACK, ["m0"])


def test_a_recreated_member_with_a_new_uid_counts_as_gone() -> None:
    pods = {
        "m0": pod(0, bound=True),
        "m1": replace(pod(1, bound=False), uid="new"),
        "m2": pod(2, bound=False),
    }
    assert [p.name for p in recover(pods).delete] == ["m0"]


HALF_BOUND = {"m0": pod(0, bound=True), "m1": pod(1, bound=False), "m2": pod(2, bound=False)}
ON_GPU_1 = a_pod("other", "team-b").gpus(1).on("n1", [1]).build()
"""Another tenant's pod on GPU 1 of n1, where the plan puts m1."""


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (
            {"nodes": ()},
            "node n1, planned for m1, left the cluster or is not Ready",
        ),
        (
            {"nodes": (a_node("n1").gpus(8).not_ready().build(),)},
            "node n1, planned for m1, left the cluster or is not Ready",
        ),
        (
            {"absent": {"n1": "node n1 was deleted"}},
            "node n1 was deleted (m1 was planned there)",
        ),
        (
            {"others": (ON_GPU_1,)},
            "GPUs [1] on n1, planned for m1, are held by other pods now",
        ),
        (
            {"promises": PromiseBook().add(Promise("u-x", "team-b/x", "n1", (2,), 99.0))},
            "GPUs [2] on n1, planned for m2, are held by other pods now",
        ),
        (
            {"nodes": (a_node("n1").gpus(2).build(),)},
            "node n1 has no GPU [2] (planned for m2)",
        ),
        (
            {
                "plan": Plan(
                    (PLAN.assignments[0], replace(PLAN.assignments[1], gpus=(1, 3)), PLAN.assignments[2])
                )
            },
            "the plan gives m1 GPUs [1, 3] where it asks for 1 distinct GPU(s)",
        ),
        (
            {"plan": Plan((*PLAN.assignments[:2], replace(PLAN.assignments[2], gpus=(1,))))},
            "GPUs [1] on n1, planned for m2, are held by other pods now",
        ),
        (
            {"plan": Plan((*PLAN.assignments[:2], replace(PLAN.assignments[2], gpus=(0,))))},
            "GPUs [0] on n1, planned for m2, are held by other pods now",
        ),
    ],
    ids=[
        "the planned node left the cluster (the cache knows)",
        "the planned node is not Ready",
        "the API server says the node was deleted (the cache lags)",
        "the node was deleted and re-added, and another pod took the planned GPU",
        "the planned GPU is promised to another pod",
        "the node came back with fewer GPUs",
        "a written plan gives a member more GPUs than it asks for",
        "a written plan gives two unbound members the same GPU",
        "a written plan gives an unbound member a bound member's GPU",
    ],
)
def test_a_plan_that_no_longer_holds_is_rolled_back_not_carried_out(
    case: dict[str, object], reason: str
) -> None:
    """The defect: recovery bound the rest "exactly as planned", onto GPUs other pods held since."""
    recovery = recover(HALF_BOUND, **case)  # type: ignore[arg-type]
    assert (recovery.kind, recovery.bind, [p.name for p in recovery.delete]) == (
        RecoveryKind.ROLLED_BACK,
        (),
        ["m0"],
    )
    assert recovery.reason == (
        f"the bind was interrupted and {reason}, so the gang cannot be completed; deleting the 1 bound "
        "member(s) still running; the 2 unbound member(s) are planned again"
    )


def test_the_gangs_own_promises_and_other_nodes_gpus_do_not_count_against_it() -> None:
    own = PromiseBook().add_all(
        Promise(a.uid, a.pod, a.node, a.gpus, 99.0, group="ml/g") for a in PLAN.assignments
    )
    elsewhere = a_pod("other", "team-b").gpus(1).on("n2", [1]).build()
    nodes = (a_node("n1").gpus(8).build(), a_node("n2").gpus(8).build())
    recovery = recover(HALF_BOUND, promises=own, others=(elsewhere,), nodes=nodes, absent={"n2": "gone"})
    assert recovery.kind is RecoveryKind.COMPLETED
    assert [a.pod for a in recovery.bind] == ["ml/m1", "ml/m2"]


def test_the_members_a_completing_recovery_binds_are_promised_what_the_plan_gives_them() -> None:
    recovery = recover(HALF_BOUND)
    held = hold_plan(recovery, HALF_BOUND, "ml/g", 42.0)
    assert [(p.pod_uid, p.node, p.gpus, p.expires_at, p.group, p.requests.gpus) for p in held] == [
        ("uid-ml-m1", "n1", (1,), 42.0, "ml/g", 1),
        ("uid-ml-m2", "n1", (2,), 42.0, "ml/g", 1),
    ]
    assert hold_plan(recover(HALF_BOUND, nodes=()), HALF_BOUND, "ml/g", 42.0) == []
