from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.gang.record import (
    PlanError,
    RecoveryKind,
    decode_plan,
    encode_plan,
    plan_recovery,
)
from scheduling.model import Pod
from scheduling.plan import Assignment, Plan
from tests.builders import a_pod

PLAN = Plan(tuple(Assignment(f"ml/m{i}", f"uid-ml-m{i}", "n1", (i,)) for i in range(3)))


def pod(i: int, *, bound: bool, phase: str = "Running") -> Pod:
    p = a_pod(f"m{i}").gpus(1).group("g").build()
    return replace(p, node_name="n1", gpu_indices=(i,), phase=phase) if bound else p


def test_the_plan_round_trips_and_bad_text_is_refused() -> None:
    assert decode_plan(encode_plan(PLAN.assignments), "ml") == PLAN
    nested = "[" * 100_000  # a hand-edited annotation past the JSON parser's depth: RecursionError
    digits = '{"v": 1, "members": [{"uid": "u", "name": "m", "node": "n", "gpus": ["²"]}]}'
    wrong = ("", "{}", '{"v": 2, "members": []}', '{"v": 1, "members": [{"uid": 1}]}', "[1]")
    for bad in (*wrong, nested, digits):
        with pytest.raises(PlanError):
            decode_plan(bad, "ml")


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
    recovery = plan_recovery(PLAN, pods)
    assert [a.pod.partition("/")[2] for a in recovery.bind] == bind
    assert [p.name for p in recovery.delete] == delete


def test_a_gang_that_cannot_be_completed_is_rolled_back_even_with_nothing_to_delete() -> None:
    """The defect: with no bound member still running, the plan was removed as if all was done."""
    pods = {"m0": pod(0, bound=True, phase="Succeeded"), "m1": pod(1, bound=False)}
    recovery = plan_recovery(PLAN, pods)
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
    recovery = plan_recovery(PLAN, pods)
    assert (recovery.kind, [p.name for p in recovery.delete]) == (RecoveryKind.ROLLED_BACK, ["m0"])


def test_a_recreated_member_with_a_new_uid_counts_as_gone() -> None:
    pods = {
        "m0": pod(0, bound=True),
        "m1": replace(pod(1, bound=False), uid="new"),
        "m2": pod(2, bound=False),
    }
    assert [p.name for p in plan_recovery(PLAN, pods).delete] == ["m0"]
