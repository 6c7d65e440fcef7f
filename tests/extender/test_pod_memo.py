"""``PodMemo`` reads every request's pod exactly as ``pod_from_api`` does, whatever came before it.

kube-scheduler sends the same pod to filter and prioritize, so the extender remembers pods by their JSON
text (decoding each twice would cost time on kube-scheduler's serial path). A remembered pod must never
stand in for a different value: the same pod with a field mutated (a type changed, ``1`` for ``true``, a
quantity altered) must convert, or fail, as it would alone. Each example reads a captured pod, then a
series of mutations of it, some repeated, through one memo, and compares every answer with a fresh
``pod_from_api``.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.wire import PodMemo
from kubeio.convert import ConvertError, pod_from_api
from tests.conftest import SHARED
from tests.extender.test_bad_input import json_values, mutate, paths

POD = orjson.loads(
    (SHARED / "fixtures" / "extender" / "nodecache-true" / "filter.request.json").read_bytes()
)["Pod"]
PATHS = paths(POD)

SWAPS: st.SearchStrategy[Any] = st.sampled_from([0, 1, 1.0, True, False, None, "1", "4", 4, 4.0, "", [], {}])


def _read(read: Any, raw: Any) -> tuple[str, Any]:
    try:
        return "pod", read(raw)
    except ConvertError as exc:
        return "error", str(exc)


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(PATHS), SWAPS | json_values, st.booleans(), st.booleans()),
        min_size=1,
        max_size=8,
    )
)
def test_the_memo_answers_as_a_fresh_conversion(steps: list[tuple[tuple[Any, ...], Any, bool, bool]]) -> None:
    memo = PodMemo(size=4)
    seen: list[Any] = [copy.deepcopy(POD)]
    for path, new, delete, again in steps:
        raw = seen[-2] if again and len(seen) > 1 else mutate(POD, path, new, delete)
        seen.append(raw)
        assert _read(memo, raw) == _read(pod_from_api, raw)
    assert _read(memo, POD) == _read(pod_from_api, POD)


def test_the_same_pod_is_converted_once_and_the_memo_stays_bounded() -> None:
    memo = PodMemo(size=2)
    first = memo(POD)
    assert memo(copy.deepcopy(POD)) is first
    for i in range(5):
        memo(mutate(POD, ("metadata", "name"), f"other-{i}", False))
    assert len(memo._seen) == 2
    assert memo(POD) is not first and memo(POD) == first
