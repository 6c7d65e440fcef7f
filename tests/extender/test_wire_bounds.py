"""What kube-scheduler never sends is a 400 with a short reason, decided before the service acts.

Names that are no Kubernetes names (they would reach API paths), a request with no candidate node, and
JSON nested deeper than orjson writes back. Each case is checked through the real app over the in-memory
cluster: HTTP 400, a reason that names the field and quotes at most a few dozen characters, and nothing
reserved or written.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from extender.wire import SHOWN, shown
from tests.conftest import SHARED
from tests.extender.test_hostile_input import check

FIXTURES = SHARED / "fixtures" / "extender"
HUGE = "n" * 200_000  # below the 256 KiB body limit of `check`


def captured(verb: str, mode: str = "nodecache-true") -> dict[str, Any]:
    request: dict[str, Any] = orjson.loads((FIXTURES / mode / f"{verb}.request.json").read_bytes())
    return request


def deep(levels: int) -> bytes:
    return b'{"a":' * levels + b"null" + b"}" * levels


def with_deep(request: dict[str, Any], path: tuple[Any, ...], levels: int = 255) -> bytes:
    request = copy.deepcopy(request)
    parent = request
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = "DEEP"
    return orjson.dumps(request).replace(b'"DEEP"', deep(levels))


BIND = captured("bind")
CASES = {
    "bind: '..' namespace": (
        "bind",
        orjson.dumps({**BIND, "PodNamespace": ".."}),
        "'PodNamespace': '..' is not",
    ),
    "bind: '/' in the pod name": (
        "bind",
        orjson.dumps({**BIND, "PodName": "a/b"}),
        "'PodName': 'a/b' is not",
    ),
    "bind: upper case node": ("bind", orjson.dumps({**BIND, "Node": "Gpu-Node-1"}), "'Node': 'Gpu-Node-1'"),
    "bind: 200 KB node name": ("bind", orjson.dumps({**BIND, "Node": HUGE}), "... (200000 characters)"),
    "bind: 200 KB UID": ("bind", orjson.dumps({**BIND, "PodUID": HUGE}), "'PodUID' must be a UID"),
    "filter: 200 KB node name": (
        "filter",
        orjson.dumps({**captured("filter"), "NodeNames": ["gpu-node-1", HUGE]}),
        "'NodeNames': 'nnnn",
    ),
    "filter: a newline inside a name": (
        "filter",
        orjson.dumps({**captured("filter"), "NodeNames": ["gpu-node-1\ngpu-node-2"]}),
        "is not a valid node name",
    ),
    "prioritize: '../x' node": (
        "prioritize",
        orjson.dumps({**captured("prioritize"), "NodeNames": ["../x"]}),
        "'../x' is not a valid node name",
    ),
    "preempt: 200 KB node key": (
        "preempt",
        orjson.dumps({**captured("preempt"), "NodeNameToMetaVictims": {HUGE: {"Pods": []}}}),
        "'NodeNameToMetaVictims': 'nnn",
    ),
    "filter: Nodes.items null": (
        "filter",
        orjson.dumps({**captured("filter"), "NodeNames": None, "Nodes": {"items": None}}),
        "no candidate node",
    ),
    "filter: no nodes at all": (
        "filter",
        orjson.dumps({**captured("filter"), "NodeNames": None, "Nodes": None}),
        "no candidate node",
    ),
    "prioritize: NodeNames empty": (
        "prioritize",
        orjson.dumps({**captured("prioritize"), "NodeNames": []}),
        "no candidate node",
    ),
    "prioritize, full nodes: items empty": (
        "prioritize",
        orjson.dumps({**captured("prioritize", "nodecache-false"), "Nodes": {"metadata": {}, "items": []}}),
        "no candidate node",
    ),
    "filter: a pod nested 255 deep": (
        "filter",
        with_deep(captured("filter"), ("Pod", "spec", "x")),
        "'Pod' is not a valid pod: the pod cannot be re-encoded",
    ),
    "prioritize: a pod nested 255 deep": (
        "prioritize",
        with_deep(captured("prioritize"), ("Pod", "metadata", "x")),
        "cannot be re-encoded",
    ),
    "filter, full nodes: a node nested 255 deep": (
        "filter",
        with_deep(captured("filter", "nodecache-false"), ("Nodes", "items", 0, "x")),
        "'Nodes.items[0]' cannot be re-encoded",
    ),
    "filter: nested 2,000 deep": (
        "filter",
        with_deep(captured("filter"), ("Pod", "spec", "x"), 2000),
        "request body is not valid JSON",
    ),
}


@pytest.mark.parametrize(("verb", "body", "reason"), CASES.values(), ids=CASES.keys())
def test_what_kube_scheduler_never_sends_is_a_400_with_a_short_reason(
    verb: str, body: bytes, reason: str
) -> None:
    status, reply = check(verb, body)
    assert status == 400
    assert reason in reply["Error"]
    assert len(reply["Error"]) < 400


def test_real_names_and_nesting_still_pass() -> None:
    for verb in ("filter", "prioritize"):
        request = captured(verb)
        request["NodeNames"] = ["gpu-node-1", "gpu-node-2.rack-1.example.com", "a" * 63 + "." + "b" * 63]
        status, _ = check(verb, with_deep(request, ("Pod", "metadata", "x"), 200))
        assert status == 200


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("gpu-node-1", "'gpu-node-1'"),
        ("x" * 200, "'" + "x" * (SHOWN - 1) + "... (200 characters)"),
        (["a"] * 100, repr(["a"] * 100)[:SHOWN] + "... (500 characters as text)"),
    ],
)
def test_a_shown_value_is_cut_with_a_marker(value: object, expected: str) -> None:
    assert shown(value) == expected
