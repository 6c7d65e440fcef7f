from __future__ import annotations

import pytest

from scheduling.gang.record import PlanError, decode_plan, encode_plan
from scheduling.plan import Assignment, Plan

PLAN = Plan(tuple(Assignment(f"ml/m{i}", f"uid-ml-m{i}", "n1", (i,)) for i in range(3)))


def test_the_plan_round_trips_and_bad_text_is_refused() -> None:
    assert decode_plan(encode_plan(PLAN.assignments), "ml") == PLAN
    nested = "[" * 100_000  # a hand-edited annotation past the JSON parser's depth: RecursionError
    digits = '{"v": 1, "members": [{"uid": "u", "name": "m", "node": "n", "gpus": ["²"]}]}'
    member = '{"uid": "u", "name": "m", "node": "n", "gpus": [0]}'
    same_uid = member.replace('"m"', '"m2"')
    twice = tuple(f'{{"v": 1, "members": [{member}, {other}]}}' for other in (member, same_uid))
    wrong = ("", "{}", '{"v": 2, "members": []}', '{"v": 1, "members": [{"uid": 1}]}', "[1]", *twice)
    for bad in (*wrong, nested, digits):
        with pytest.raises(PlanError):
            decode_plan(bad, "ml")
