"""Replay every request kube-scheduler v1.36 really sent (shared/fixtures/extender) against the app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from extender.wire import parse_extender_args
from tests.conftest import SHARED
from tests.extender.appkit import fixture_cluster, make_app

FIXTURES = SHARED / "fixtures" / "extender"
REQUESTS = sorted(
    p for mode in ("nodecache-true", "nodecache-false") for p in (FIXTURES / mode).glob("*.request.json")
)
FILTER_KEYS = {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}


def verb_of(path: Path) -> str:
    return path.name.split(".")[0].split("-")[0]


def replay(path: Path) -> tuple[int, Any, Any, Any]:
    app, _, binder, _ = make_app(fixture_cluster(SHARED))
    request = orjson.loads(path.read_bytes())
    reply = app.test_client().post(
        f"/{verb_of(path)}", data=path.read_bytes(), content_type="application/json"
    )
    captured = orjson.loads(path.with_name(path.name.replace(".request.", ".response.")).read_bytes())
    return reply.status_code, request, orjson.loads(reply.data), (captured, binder)


def test_every_captured_request_is_covered() -> None:
    assert {verb_of(p) for p in REQUESTS} == {"filter", "prioritize", "bind", "preempt"}
    assert len(REQUESTS) == 12


@pytest.mark.parametrize(
    "path", [p for p in REQUESTS if verb_of(p) == "filter"], ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_filter_reply_has_the_protocol_shape(path: Path) -> None:
    status, request, reply, (captured, _) = replay(path)
    assert status == 200
    assert set(reply) == FILTER_KEYS == set(captured)
    assert reply["Error"] == ""
    assert isinstance(reply["FailedNodes"], dict)
    assert isinstance(reply["FailedAndUnresolvableNodes"], dict)
    if request["NodeNames"] is not None:
        assert reply["Nodes"] is None
        assert reply["NodeNames"] == request["NodeNames"], (
            "empty 8-GPU nodes all fit, in the scheduler's order"
        )
    else:
        assert reply["NodeNames"] is None
        names = [n["metadata"]["name"] for n in reply["Nodes"]["items"]]
        assert names == [n["metadata"]["name"] for n in request["Nodes"]["items"]]
        assert reply["Nodes"]["items"] == request["Nodes"]["items"], "node objects are returned unchanged"


@pytest.mark.parametrize(
    "path", [p for p in REQUESTS if verb_of(p) == "prioritize"], ids=lambda p: p.parent.name
)
def test_prioritize_reply_is_a_bare_array_of_integer_scores(path: Path) -> None:
    app, service, _, _ = make_app(fixture_cluster(SHARED))
    request = orjson.loads(path.read_bytes())
    response = app.test_client().post("/prioritize", data=path.read_bytes(), content_type="application/json")
    reply = orjson.loads(response.data)
    names = request["NodeNames"] or [n["metadata"]["name"] for n in request["Nodes"]["items"]]
    assert response.status_code == 200 and isinstance(reply, list)
    assert all(set(h) == {"Host", "Score"} and type(h["Score"]) is int for h in reply)
    # What the core scored, less the lowest of its scores; a host left out is one at the lowest.
    full = service.prioritize(parse_extender_args(request).pod, tuple(names))
    lowest = min(score for _, score in full)
    assert {h["Host"]: h["Score"] for h in reply} == {n: s - lowest for n, s in full if s > lowest}
    assert [h["Host"] for h in reply] == [n for n, s in full if s > lowest], "in the candidates' order"
    assert all(1 <= h["Score"] <= 10 for h in reply)


@pytest.mark.parametrize("path", [p for p in REQUESTS if verb_of(p) == "bind"], ids=lambda p: p.parent.name)
def test_bind_creates_one_binding_with_uid_and_gpus(path: Path) -> None:
    status, request, reply, (captured, binder) = replay(path)
    assert status == 200
    assert reply == captured == {"Error": ""}
    pod = f"{request['PodNamespace']}/{request['PodName']}"
    assert binder.calls == [(pod, request["PodUID"], request["Node"], {"phalanx.io/gpus": "0,1"})]


@pytest.mark.parametrize(
    "path", [p for p in REQUESTS if verb_of(p) == "preempt"], ids=lambda p: p.parent.name
)
def test_preempt_returns_the_victims_in_meta_form(path: Path) -> None:
    status, _, reply, (captured, _) = replay(path)
    assert status == 200
    assert reply == captured
