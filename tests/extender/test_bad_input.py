"""Fuzzed bad requests against every verb: HTTP 400 with a reason, never a 5xx, nothing changed."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import SHARED
from tests.extender.appkit import fixture_cluster, make_app

FIXTURES = SHARED / "fixtures" / "extender" / "nodecache-true"
VERBS = ("filter", "prioritize", "bind", "preempt")
VALID = {verb: orjson.loads((FIXTURES / f"{verb}.request.json").read_bytes()) for verb in VERBS}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += paths(item, (*prefix, i))
    return found


def mutate(request: Any, path: tuple[Any, ...], new: Any, delete: bool) -> Any:
    mutated = copy.deepcopy(request)
    parent = mutated
    for step in path[:-1]:
        parent = parent[step]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return mutated


def post(verb: str, data: bytes) -> tuple[int, Any, bool]:
    cluster = fixture_cluster(SHARED)
    before = (dict(cluster.nodes), dict(cluster.pods))  # values are frozen records
    app, service, binder, _ = make_app(cluster, max_body_bytes=256 * 1024)
    reply = app.test_client().post(f"/{verb}", data=data, content_type="application/json")
    body = orjson.loads(reply.data)
    unchanged = (
        binder.calls == [] and service.promises.by_uid == {} and (cluster.nodes, cluster.pods) == before
    )
    return reply.status_code, body, unchanged


def check(status: int, body: Any, unchanged: bool) -> None:
    assert status in (200, 400), f"status {status}: {body}"
    if status == 400:
        assert isinstance(body, dict) and isinstance(body["Error"], str) and body["Error"]
        assert unchanged, "a rejected request changed state"


FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(data=st.binary(max_size=200))
def test_random_bytes(verb: str, data: bytes) -> None:
    check(*post(verb, data))


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(value=json_values)
def test_random_json(verb: str, value: Any) -> None:
    status, body, unchanged = post(verb, orjson.dumps(value))
    check(status, body, unchanged)
    assert status == 400 or isinstance(value, dict)


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(data=st.data())
def test_mutated_real_requests(verb: str, data: st.DataObject) -> None:
    request = VALID[verb]
    path = data.draw(st.sampled_from(paths(request)))
    mutated = mutate(request, path, data.draw(json_values), data.draw(st.booleans()))
    status, body, unchanged = post(verb, orjson.dumps(mutated))
    check(status, body, unchanged)


@pytest.mark.parametrize("verb", VERBS)
def test_oversized_body_is_rejected_with_its_size(verb: str) -> None:
    status, body, unchanged = post(verb, b'{"Pod": "' + b"x" * 300_000 + b'"}')
    assert status == 400 and "larger than the limit" in body["Error"] and unchanged


@pytest.mark.parametrize(
    ("verb", "field", "reason"),
    [
        ("bind", ("Node",), "does not know"),
        ("bind", ("PodUID",), "must be a non-empty string"),
        ("filter", ("Pod", "spec", "containers"), "must be a list"),
        ("preempt", ("NodeNameToMetaVictims",), "must be an object"),
        ("prioritize", ("NodeNames",), "list of node names"),
    ],
)
def test_named_bad_fields_get_a_reason(verb: str, field: tuple[str, ...], reason: str) -> None:
    value: Any = "ghost-node" if field == ("Node",) else 42
    status, body, unchanged = post(verb, orjson.dumps(mutate(VALID[verb], field, value, delete=False)))
    assert status == 400 and reason in body["Error"] and unchanged


def test_unknown_nodes_in_filter_are_turned_down_one_by_one() -> None:
    request = mutate(VALID["filter"], ("NodeNames",), ["gpu-node-1", "ghost"], delete=False)
    status, body, unchanged = post("filter", orjson.dumps(request))
    assert status == 200 and unchanged
    assert body["NodeNames"] == ["gpu-node-1"]
    assert body["FailedAndUnresolvableNodes"] == {}, "a node passes: reasons are not sent (never read)"
    request = mutate(VALID["filter"], ("NodeNames",), ["ghost", "phantom"], delete=False)
    status, body, unchanged = post("filter", orjson.dumps(request))
    assert status == 200 and unchanged and body["NodeNames"] == []
    assert body["FailedAndUnresolvableNodes"] == dict.fromkeys(
        ["ghost", "phantom"], "node(s) not yet known to phalanx (its node cache has not seen them)"
    )
