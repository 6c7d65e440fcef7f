"""The hot path answers filter and prioritize exactly as the Flask routes do, good input and bad."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.extender_settings import ExtenderSettings
from extender.hot import NamesMemo, front_handler
from extender.service import Extender
from extender.worker import wsgi_handler
from kubeio.serving import Reply, Request
from tests.builders import FakeBinder
from tests.conftest import SHARED
from tests.extender.appkit import fixture_cluster


def request(path: str, body: bytes, method: str = "POST") -> Request:
    return Request(
        method, path, (("content-type", "application/json"),), body, None, ("127.0.0.1", 8888), "http"
    )


def both(*, decisive: bool = True) -> tuple[Any, Any, CollectorRegistry]:
    """The hot handler and the plain Flask handler over two alike services (so memos do not mix)."""
    handlers = []
    registry = CollectorRegistry()
    for hot in (True, False):
        cluster = fixture_cluster(SHARED)
        service = Extender(
            cluster, FakeBinder(cluster), clock=lambda: 0.0, promise_ttl=60.0, decisive=decisive
        )
        app = create_app(
            ExtenderSettings(hot_verbs=hot),
            service,
            registry=registry if hot else CollectorRegistry(),
            ready=lambda: True,
        )
        plain = wsgi_handler(app)

        def counted(req: Request, plain: Callable[[Request], Reply] = plain) -> Reply:
            FALLBACKS.append(req.target)
            return plain(req)

        handlers.append(front_handler(app, counted if hot else plain))
    FALLBACKS.clear()
    return handlers[0], handlers[1], registry


FALLBACKS: list[str] = []
"""Requests the hot handler passed on to Flask."""


def same(a: Reply, b: Reply) -> None:
    assert a.status == b.status
    assert orjson.loads(a.body) == orjson.loads(b.body)
    assert dict(a.headers)["content-type"].startswith("application/json")


def captured(verb: str) -> dict[str, Any]:
    path = SHARED / "fixtures" / "extender" / "nodecache-true" / f"{verb}.request.json"
    value: dict[str, Any] = orjson.loads(path.read_bytes())
    return value


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("decisive", [True, False])
def test_captured_requests_get_the_same_reply_and_are_counted(verb: str, decisive: bool) -> None:
    hot, flask, registry = both(decisive=decisive)
    body = orjson.dumps(captured(verb))
    for _ in range(2):  # the second time from the pod memo
        same(hot(request(f"/{verb}", body)), flask(request(f"/{verb}", body)))
    assert FALLBACKS == []  # answered by the hot path itself
    assert registry.get_sample_value("phalanx_extender_requests_total", {"verb": verb, "outcome": "ok"}) == 2


def mutations(good: dict[str, Any]) -> list[bytes]:
    out: list[bytes] = [b"", b"[]", b"{", b"null", b'{"Pod": {}}']
    changes: list[tuple[str, Any]] = [
        ("NodeNames", []),
        ("NodeNames", None),
        ("NodeNames", ["bad/name"]),
        ("NodeNames", [1, 2]),
        ("NodeNames", "gpu-node-1"),
        ("NodeNames", ["not-a-node"]),
        ("Nodes", {"items": "x"}),
        ("Nodes", {"items": []}),
        ("Pod", None),
        ("Pod", {"metadata": {"name": "x"}}),
        ("Pod", "pod"),
    ]
    for key, value in changes:
        changed = copy.deepcopy(good)
        changed[key] = value
        out.append(orjson.dumps(changed))
    missing = copy.deepcopy(good)
    del missing["NodeNames"]
    out.append(orjson.dumps(missing))
    deep: Any = {}
    for _ in range(300):
        deep = {"x": deep}
    nested = copy.deepcopy(good)
    nested["Pod"]["metadata"]["annotations"] = {"a": "b"}
    nested["Pod"]["spec"]["deep"] = deep
    out.append(_deep_json(nested))
    return out


def _deep_json(value: dict[str, Any]) -> bytes:
    """Write JSON nested deeper than orjson writes (254 levels), by hand as a hostile client could."""
    deep = value["Pod"]["spec"].pop("deep")
    depth = 0
    while deep:
        deep, depth = deep["x"], depth + 1
    text = orjson.dumps(value).decode()
    hole = '"spec":{'
    nested = '{"x":' * depth + "{}" + "}" * depth
    return text.replace(hole, f'{hole}"deep":{nested},', 1).encode()


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_refused_requests_get_the_flask_routes_refusal(verb: str) -> None:
    hot, flask, _ = both()
    for body in mutations(captured(verb)):
        same(hot(request(f"/{verb}", body)), flask(request(f"/{verb}", body)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["gpu-node-1", "gpu-node-2", "gpu-node-3"]), min_size=1, max_size=6))
def test_any_candidate_list_gets_the_same_reply(names: list[str]) -> None:
    hot, flask, _ = both()
    for verb in ("filter", "prioritize"):
        body = orjson.dumps({**captured(verb), "NodeNames": names})
        same(hot(request(f"/{verb}", body)), flask(request(f"/{verb}", body)))
    assert FALLBACKS == []


def test_other_paths_and_methods_go_to_flask() -> None:
    hot, flask, _ = both()
    same(hot(request("/healthz", b"", "GET")), flask(request("/healthz", b"", "GET")))
    body = orjson.dumps(captured("filter"))
    assert hot(request("/filter", body, "GET")).status == 405


def test_the_same_candidate_text_gives_the_same_checked_tuple_and_bad_names_go_to_flask() -> None:
    memo = NamesMemo()
    first = memo(b'["gpu-node-1","gpu-node-2"]')
    assert first == ("gpu-node-1", "gpu-node-2")
    assert memo(b'["gpu-node-1","gpu-node-2"]') is first
    assert memo(b'["gpu-node-1"]') == ("gpu-node-1",)
    assert memo(b'["bad/name"]') is None
    assert memo(b"[]") is None
    assert memo(b"null") is None
    assert memo(b'["gpu-node-1"]') == ("gpu-node-1",)
