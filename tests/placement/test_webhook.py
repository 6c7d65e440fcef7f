"""The pin webhook: a worker being created gets the node the pass would give it, over real TLS.

The admitter is driven with reviews as the API server sends them and an in-memory job reader; the
server test runs the real HTTPS server with a certificate made by openssl (as the test bed does) and
checks that a client verifying against the CA gets the same answer. The API server calling it is
proven end to end in ``tests/e2e/test_elastic_mpijob.py``.
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeio.errors import UnavailableError
from kubeio.mpijobs import MpiJob, render_plan
from placement.serving_tls import ServingTls, files_loader
from placement.webhook import MUTATE_PATH, GateWebhook, PinWebhook, serve_webhook
from scheduling.elastic.pinning import choose_pins
from scheduling.model import Pod, Resources
from tests.builders import FakeEvents
from tests.conftest import REPO
from tests.kubeio.test_webhook_review import WORKER, review
from tests.placement.test_elastic_pass import worker


@dataclass
class FakeJobReader:
    jobs: dict[str, MpiJob]
    pods: list[Pod] = field(default_factory=list)
    fail: bool = False

    def get(self, namespace: str, name: str) -> MpiJob | None:
        if self.fail:
            raise UnavailableError(0, "Unavailable", "connection refused")
        return self.jobs.get(f"{namespace}/{name}")

    def workers(self, namespace: str, name: str) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods if p.labels.get("training.kubeflow.org/job-name") == name)


def job(plan: dict[str, int] | None, *, elastic: bool = True) -> MpiJob:
    text = None if plan is None else render_plan(sum(plan.values()), plan)
    return MpiJob(
        "ml", "mnist", "uid-mnist", "", 4, 3, "6" if elastic else None, Resources(gpus=2), None, text
    )


def answer(admitter: PinWebhook | GateWebhook, body: bytes) -> tuple[int, list[Any] | None]:
    status, reply = admitter.review(body)
    if status != 200:
        return status, None
    response = json.loads(reply)["response"]
    assert response["allowed"] is True
    return status, json.loads(base64.b64decode(response["patch"])) if "patch" in response else None


LAUNCHER = json.loads(json.dumps(WORKER).replace('job-role": "worker"', 'job-role": "launcher"'))
RUNNING = [worker("mnist", 0, "n1"), worker("mnist", 1, "n1"), worker("mnist", 2, "n2")]


def test_a_new_worker_gets_the_node_the_pass_would_pin_it_to() -> None:
    plan = {"n1": 3, "n2": 2}
    events = FakeEvents()
    admitter = PinWebhook(FakeJobReader({"ml/mnist": job(plan)}, RUNNING), events, effect="NoSchedule")
    status, patch = answer(admitter, review(WORKER))  # mnist-worker-3
    created = replace(worker("mnist", 3), uid="x")
    expected = [n for p, n in choose_pins(plan, [*RUNNING, created]) if p.name == "mnist-worker-3"]
    assert expected == ["n1"]
    toleration = {"key": "phalanx.io/hostname", "operator": "Equal", "value": "n1", "effect": "NoSchedule"}
    assert (status, patch) == (200, [{"op": "add", "path": "/spec/tolerations", "value": [toleration]}])
    assert events.events == [
        (
            "MPIJob",
            "mnist",
            "Normal",
            "Pinned",
            "pinned mnist-worker-3 to n1 as it was created: the layout of ml/mnist puts a worker there",
        )
    ]


def test_a_pending_lower_index_takes_its_place_first() -> None:
    plan = {"n1": 3, "n2": 1}
    reader = FakeJobReader({"ml/mnist": job(plan)}, [*RUNNING[:2], worker("mnist", 2)])
    _, patch = answer(PinWebhook(reader, FakeEvents(), effect="NoSchedule"), review(WORKER))
    assert patch is not None and patch[0]["value"][0]["value"] == "n2", "worker-2 (waiting) goes to n1 first"


@pytest.mark.parametrize(
    ("jobs", "obj", "why"),
    [
        pytest.param({}, WORKER, "no such MPIJob", id="no-job"),
        pytest.param({"ml/mnist": job({"n1": 3}, elastic=False)}, WORKER, "not elastic", id="rigid-job"),
        pytest.param({"ml/mnist": job(None)}, WORKER, "no plan yet", id="no-plan"),
        pytest.param({"ml/mnist": job({"n1": 2, "n2": 1})}, WORKER, "the plan is full", id="no-room"),
        pytest.param(
            {"ml/mnist": job({"n1": 3, "n2": 2})},
            LAUNCHER,
            "not a worker",
            id="launcher",
        ),
    ],
)
def test_a_pod_that_is_no_planned_worker_is_allowed_as_it_is(
    jobs: dict[str, MpiJob], obj: dict[str, Any], why: str
) -> None:
    events = FakeEvents()
    admitter = PinWebhook(FakeJobReader(jobs, RUNNING), events, effect="NoSchedule")
    assert answer(admitter, review(obj)) == (200, None), why
    assert events.events == []


def test_an_api_failure_allows_the_pod_unpinned_and_bad_input_gets_a_reason() -> None:
    reader = FakeJobReader({"ml/mnist": job({"n1": 4})}, RUNNING, fail=True)
    admitter = PinWebhook(reader, FakeEvents(), effect="NoSchedule")
    assert answer(admitter, review(WORKER)) == (200, None)
    status, reply = admitter.review(b"[]")
    assert status == 400 and b"not an AdmissionReview" in reply


def test_the_server_answers_over_tls_verified_against_the_ca(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "hack"))
    from localcluster.pki import ensure_pki, ensure_serving_cert

    ensure_pki(tmp_path)
    key, crt = ensure_serving_cert(tmp_path, "pin-webhook", "/CN=test", ("IP:127.0.0.1",))
    admitter = PinWebhook(
        FakeJobReader({"ml/mnist": job({"n1": 4})}, RUNNING), FakeEvents(), effect="NoExecute"
    )
    tls = ServingTls(files_loader(str(crt), str(key)))
    assert tls.reload()
    server = serve_webhook({MUTATE_PATH: admitter.review}, host="127.0.0.1", port=0, tls=tls)
    try:
        port = server.server_address[1]
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        request = urllib.request.Request(
            f"https://127.0.0.1:{port}{MUTATE_PATH}", data=review(WORKER), method="POST"
        )
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            body = json.loads(reply.read())
        patch = json.loads(base64.b64decode(body["response"]["patch"]))
        assert patch[0]["value"][0] == {
            "key": "phalanx.io/hostname",
            "operator": "Equal",
            "value": "n1",
            "effect": "NoExecute",
        }
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(
                urllib.request.Request(f"https://127.0.0.1:{port}{MUTATE_PATH}", data=b"{}", method="POST"),
                context=context,
                timeout=10,
            )
        assert refused.value.code == 400
        refused.value.close()
    finally:
        server.shutdown()
        server.server_close()


def _gated(reply: bytes) -> bool:
    response = json.loads(reply)["response"]
    assert response["allowed"] is True and response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    return any(op["path"].startswith("/spec/schedulingGates") for op in patch)


ANY_POD = {
    "a non-object metadata": {**WORKER, "metadata": "hostile"},
    "metadata null": {**WORKER, "metadata": None},
    "a field phalanx cannot read": {**WORKER, "spec": {**WORKER["spec"], "priority": "high"}},
    "an unreadable quantity": {
        **WORKER,
        "spec": {
            **WORKER["spec"],
            "containers": [{"name": "w", "resources": {"limits": {"cpu": "1e999999"}}}],
        },
    },
    "nested 300 deep": {**WORKER, "metadata": {**WORKER["metadata"], "x": json.loads("[" * 300 + "]" * 300)}},
    "above 3 MiB": {
        **WORKER,
        "spec": {**WORKER["spec"], "containers": [{"name": "w", "args": ["<" * 3_300_000]}]},
    },
}


@pytest.mark.parametrize("obj", ANY_POD.values(), ids=ANY_POD.keys())
def test_any_pod_the_api_server_can_send_is_gated_and_allowed_by_the_pin_webhook(obj: dict[str, Any]) -> None:
    status, reply = GateWebhook(enabled=True).review(review(obj))
    assert status == 200 and _gated(reply)
    pin = PinWebhook(FakeJobReader({}, RUNNING), FakeEvents(), effect="NoSchedule")
    status, reply = pin.review(review(obj))
    assert status == 200 and not _gated(reply)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"a":' * 100_000 + b"null" + b"}" * 100_000, b"nested too deeply"),
        (b"{not json", b"not an AdmissionReview"),
        (review([1, 2]), b"not an AdmissionReview"),
        (b'{"apiVersion": "admission.k8s.io/v1"}', b"with a request"),
    ],
)
def test_only_a_body_that_is_no_review_of_a_pod_gets_400_with_a_reason(body: bytes, reason: bytes) -> None:
    for admitter in (
        GateWebhook(enabled=True),
        PinWebhook(FakeJobReader({}), FakeEvents(), effect="NoSchedule"),
    ):
        status, reply = admitter.review(body)
        assert status == 400 and reason in reply and len(reply) < 1000


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _paths(item, (*prefix, i))
    return found


REVIEW = json.loads(review(WORKER))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_mutated_review_gets_a_review_answer_or_a_400_with_a_reason(data: st.DataObject) -> None:
    body = json.loads(json.dumps(REVIEW))
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(body) or [("request",)]))
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            parent.pop(path[-1], None)
        elif isinstance(parent, dict | list):
            parent[path[-1]] = data.draw(json_values)
    raw = json.dumps(body).encode()
    events = FakeEvents()
    reader = FakeJobReader({"ml/mnist": job({"n1": 3, "n2": 2})}, RUNNING)
    for admitter in (GateWebhook(enabled=True), PinWebhook(reader, events, effect="NoSchedule")):
        status, reply = admitter.review(raw)
        if status == 200:
            answer = json.loads(reply)
            assert answer["kind"] == "AdmissionReview" and answer["response"]["allowed"] is True
            assert answer["response"]["uid"] == body["request"]["uid"]
        else:
            assert status == 400 and reply and len(reply) < 1000


def test_the_gate_webhook_stamps_every_phalanx_pod_it_answers_for_gated_or_not() -> None:
    on = GateWebhook(enabled=True)
    stamp_path = "/metadata/annotations/phalanx.io~1gate-webhook"
    annotated = json.loads(json.dumps(WORKER))
    annotated["metadata"]["annotations"] = {"team": "a"}
    _, ops = answer(on, review(annotated))
    assert ops is not None and ops[-1] == {"op": "add", "path": stamp_path, "value": "answered"}
    assert ops[0]["path"] == "/spec/schedulingGates", "gated too"
    pre_gated = json.loads(json.dumps(annotated))
    pre_gated["spec"]["schedulingGates"] = [{"name": "phalanx.io/admission"}]
    assert answer(on, review(pre_gated)) == (200, [{"op": "add", "path": stamp_path, "value": "answered"}])
    placed = json.loads(json.dumps(annotated))
    placed["spec"]["nodeName"] = "n1"
    assert answer(on, review(placed)) == (200, [{"op": "add", "path": stamp_path, "value": "answered"}])
    other = json.loads(json.dumps(annotated))
    other["spec"]["schedulerName"] = "default-scheduler"
    assert answer(on, review(other)) == (200, None)
    assert answer(GateWebhook(enabled=False), review(annotated)) == (200, None), "gates off: no stamp"
