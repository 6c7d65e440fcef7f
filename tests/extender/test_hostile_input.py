"""Hostile and extreme input against every verb, through the real app over in-memory fakes.

Every captured kube-scheduler request (both ``nodeCacheCapable`` modes), plus requests that name a
24-GPU node, is mutated at one to three places, with extreme quantities (huge exponents, thousands of
digits, underscores, spaces, non-ASCII digits, 64-bit integers, floats) aimed at the pod's resources
and with random JSON anywhere. Whatever the request: the answer is 200 or 400, a 400 leaves nothing
reserved or written, and no request runs longer than a hang bound.
"""

from __future__ import annotations

import copy
import time
from dataclasses import replace
from itertools import pairwise
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scheduling.topology import TopologyCache
from tests.builders import FakeCluster, a_node, a_pod
from tests.conftest import SHARED
from tests.extender.appkit import fixture_cluster, make_app
from tests.extender.test_bad_input import json_values, paths
from tests.scheduling.topology.test_scoring import layered

HANG_BOUND = 1.0
"""Seconds one request may take here: a bound that catches a hang or a runaway search, not a speed goal
(the slowest request here takes tens of milliseconds; the quantity that burnt 40 s would fail it)."""

FIXTURES = SHARED / "fixtures" / "extender"
VERBS = ("filter", "prioritize", "bind", "preempt")
BIG = "gpu-node-big"
BIG_NODE = replace(a_node(BIG).gpus(24).build(), topology=TopologyCache().topology(layered(24, bridges=True)))
WIDE = a_pod("wide", "gpu-test").gpus(12).build()  # waits for 12 GPUs: only the big node has them


def _captured(verb: str) -> list[dict[str, Any]]:
    return [
        orjson.loads(p.read_bytes())
        for mode in ("nodecache-true", "nodecache-false")
        for p in sorted((FIXTURES / mode).glob(f"{verb}*.request.json"))
    ]


def _with_big_node(verb: str, request: dict[str, Any]) -> dict[str, Any]:
    """The request, naming the 24-GPU node too (a bind: of the 12-GPU pod to it)."""
    request = copy.deepcopy(request)
    if verb == "bind":
        request.update(PodName=WIDE.name, PodNamespace=WIDE.namespace, PodUID=WIDE.uid, Node=BIG)
    elif verb == "preempt":
        request["NodeNameToMetaVictims"] = {BIG: {"Pods": [], "NumPDBViolations": 0}}
    elif request.get("NodeNames") is not None:
        request["NodeNames"] = [*request["NodeNames"], BIG]
    return request


REQUESTS = {
    verb: [
        *_captured(verb),
        *(
            _with_big_node(verb, r)
            for r in _captured(verb)
            if r.get("NodeNames") or verb in ("bind", "preempt")
        ),
    ]
    for verb in VERBS
}
RESOURCE_PATHS = [
    ("Pod", "spec", container, 0, "resources", kind, resource)
    for container in ("containers", "initContainers")
    for kind in ("requests", "limits")
    for resource in ("cpu", "memory", "nvidia.com/gpu")
]
SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"]


def _spliced(text: str, at: int, extra: str) -> str:
    at = min(at, len(text))
    return text[:at] + extra + text[at:]


extreme_quantities = st.one_of(
    st.builds("{}{}{}".format, st.integers(1, 999), st.sampled_from("eE"), st.integers(-(10**12), 10**12)),
    st.builds("{}e{}".format, st.text("0123456789", min_size=1, max_size=30), st.integers(0, 10**60)),
    st.text("0123456789", min_size=1, max_size=5000),
    st.builds("{}{}".format, st.integers(0, 2**70), st.sampled_from(SUFFIXES)),
    st.builds(
        _spliced,
        st.sampled_from(["1000", "8", "16Gi", "500m", "1e3"]),
        st.integers(0, 5),
        st.sampled_from(["_", " ", "\t", "\u0661", "\u0968", "\uff18", "+", "."]),
    ),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
)


def put(request: Any, path: tuple[Any, ...], value: Any, delete: bool) -> bool:
    """Set (or delete) ``path`` in ``request``, creating missing objects on the way; False if it cannot."""
    parent = request
    for step, following in pairwise(path):
        if isinstance(parent, dict):
            key = str(step)  # an index into what an earlier mutation made an object: JSON keys are strings
            if not isinstance(parent.get(key), dict | list):
                parent[key] = [] if isinstance(following, int) else {}
            parent = parent[key]
        elif isinstance(parent, list) and isinstance(step, int):
            while len(parent) <= step:
                parent.append({})
            parent = parent[step]
        else:
            return False
    last = path[-1]
    if isinstance(parent, dict):
        if delete:
            parent.pop(str(last), None)
        else:
            parent[str(last)] = value
        return True
    if isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        parent[last] = value
        return True
    return False


def cluster_with_big_node() -> FakeCluster:
    return fixture_cluster(SHARED).add(BIG_NODE, WIDE)


def post(verb: str, body: bytes) -> tuple[int, Any, bool, float]:
    """Send one request to a fresh app: (status, reply, whether nothing was reserved or written, seconds)."""
    cluster = cluster_with_big_node()
    before = (dict(cluster.nodes), dict(cluster.pods))
    app, service, binder, _ = make_app(cluster, max_body_bytes=256 * 1024)
    client = app.test_client()
    start = time.perf_counter()
    reply = client.post(f"/{verb}", data=body, content_type="application/json")
    elapsed = time.perf_counter() - start
    book = service.ledger.book
    untouched = (
        binder.calls == []
        and book.by_uid == {}
        and book.by_group == {}
        and (cluster.nodes, cluster.pods) == before
    )
    return reply.status_code, orjson.loads(reply.data), untouched, elapsed


def check(verb: str, body: bytes) -> tuple[int, Any]:
    status, reply, untouched, elapsed = post(verb, body)
    assert status in (200, 400), f"{verb}: status {status}: {reply}"
    assert elapsed < HANG_BOUND, f"{verb} took {elapsed:.2f}s"
    if status == 400:
        assert isinstance(reply, dict) and isinstance(reply["Error"], str) and reply["Error"]
        assert len(reply["Error"]) < 1000, "a reason never grows with the input"
        assert untouched, f"{verb}: a refused request left something reserved or written"
    return status, reply


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("verb", VERBS)
@FUZZ
@given(data=st.data())
def test_every_verb_over_the_whole_request_space(verb: str, data: st.DataObject) -> None:
    request = copy.deepcopy(data.draw(st.sampled_from(REQUESTS[verb]), label="request"))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.sampled_from([*RESOURCE_PATHS, ("Nodes",), ("NodeNames",), *paths(request)]))
        value = data.draw(extreme_quantities if path in RESOURCE_PATHS else json_values | extreme_quantities)
        put(request, path, value, delete=data.draw(st.booleans()))
    status, _ = check(verb, orjson.dumps(request))
    event(f"HTTP {status}")


QUANTITIES = ["1e999999", "1e100000000", "7e5000", "9" * 5000, "1_000", " 1", "1 ", "\u0661", "8\uff18"]


@pytest.mark.parametrize("resource", ["cpu", "memory", "nvidia.com/gpu"])
@pytest.mark.parametrize("quantity", QUANTITIES, ids=lambda q: repr(q[:12]))
@pytest.mark.parametrize("verb", ["filter", "prioritize", "preempt"])
def test_an_extreme_quantity_is_a_400_that_names_it(verb: str, quantity: str, resource: str) -> None:
    request = copy.deepcopy(REQUESTS[verb][0])
    put(request, ("Pod", "spec", "containers", 0, "resources", "requests", resource), quantity, delete=False)
    status, reply = check(verb, orjson.dumps(request))
    assert status == 400
    assert "'Pod' is not a valid pod: spec.containers[0].resources.requests: " in reply["Error"]
    assert repr(quantity[:20]) in reply["Error"]


@pytest.mark.parametrize("nodes", [42, "gpu-node-1", [{"metadata": {"name": "gpu-node-1"}}], {"items": 5}])
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
@pytest.mark.parametrize("mode", ["nodecache-true", "nodecache-false"])
def test_a_wrongly_typed_nodes_field_is_a_400(mode: str, verb: str, nodes: Any) -> None:
    request = orjson.loads((FIXTURES / mode / f"{verb}.request.json").read_bytes())
    request["Nodes"] = nodes
    status, reply = check(verb, orjson.dumps(request))
    assert status == 400
    assert reply["Error"].startswith("'Nodes' must be a NodeList object with a list of 'items'")


def test_prioritize_and_bind_on_a_24_gpu_node_answer() -> None:
    request = _with_big_node("prioritize", REQUESTS["prioritize"][0])
    put(
        request, ("Pod", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), "12", delete=False
    )
    status, reply = check("prioritize", orjson.dumps(request))
    assert status == 200 and {"Host": BIG, "Score": reply[-1]["Score"]} == reply[-1]
    cluster = cluster_with_big_node()
    app, _, binder, _ = make_app(cluster)
    body = orjson.dumps(_with_big_node("bind", REQUESTS["bind"][0]))
    reply = app.test_client().post("/bind", data=body, content_type="application/json")
    assert (reply.status_code, orjson.loads(reply.data)) == (200, {"Error": ""})
    [(_, _, node, annotations)] = binder.calls
    assert node == BIG and len(annotations["phalanx.io/gpus"].split(",")) == 12
