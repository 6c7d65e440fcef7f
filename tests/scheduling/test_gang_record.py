from __future__ import annotations

from dataclasses import replace

import pytest

from scheduling.gang_record import PlanError, PlannedMember, decode_plan, encode_plan, plan_recovery
from scheduling.model import Pod
from tests.builders import a_pod

PLAN = tuple(PlannedMember(f"uid-ml-m{i}", f"m{i}", "n1", (i,)) for i in range(3))


def pod(i: int, *, bound: bool) -> Pod:
    p = a_pod(f"m{i}").gpus(1).group("g").build()
    return replace(p, node_name="n1", gpu_indices=(i,), phase="Running") if bound else p


def test_the_plan_round_trips_and_bad_text_is_refused() -> None:
    assert decode_plan(encode_plan(PLAN)) == PLAN
    nested = "[" * 100_000  # a hand-edited annotation past the JSON parser's depth: RecursionError
    digits = '{"v": 1, "members": [{"uid": "u", "name": "m", "node": "n", "gpus": ["²"]}]}'
    wrong = ("", "{}", '{"v": 2, "members": []}', '{"v": 1, "members": [{"uid": 1}]}', "[1]")
    for bad in (*wrong, nested, digits):
        with pytest.raises(PlanError):
            decode_plan(bad)


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
    ],
    ids=[
        "half-bound, all there: complete",
        "half-bound, a member gone: roll back",
        "all bound: done",
        "all bound, one lost later: done (the placement manager's case)",
        "crash before the first Binding: complete",
    ],
)
def test_recovery(pods: dict[str, Pod], bind: list[str], delete: list[str]) -> None:
    recovery = plan_recovery(PLAN, pods)
    assert [m.name for m in recovery.bind] == bind
    assert [p.name for p in recovery.delete] == delete


def test_a_recreated_member_with_a_new_uid_counts_as_gone() -> None:
    pods = {
        "m0": pod(0, bound=True),
        "m1": replace(pod(1, bound=False), uid="new"),
        "m2": pod(2, bound=False),
    }
    assert [p.name for p in plan_recovery(PLAN, pods).delete] == ["m0"]
