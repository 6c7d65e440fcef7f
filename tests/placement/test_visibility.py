"""The visibility endpoint's answers: who asks (TokenReview), may they (SubjectAccessReview), and what.

The API server's reviews are played by a fake at phalanx's boundary (``request``); the real ones, with a
real ServiceAccount and RBAC, are in tests/e2e/test_visibility.py.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson
import pytest

from kubeio.access_review import ACCESS_REVIEWS, TOKEN_REVIEWS
from kubeio.errors import UnavailableError
from kubeio.http import JsonObject
from kubeio.serving import Request
from placement.visibility import QUESTION_BURST, QUESTIONS_PER_MINUTE, QuestionLimit, Visibility, parse
from scheduling.explain.visible import OTHER
from tests.builders import FakeClock, a_node, a_pod, snapshot_of
from tests.kubeio.fake_api import FakeApi, Sent

SNAPSHOT = snapshot_of(
    [a_node(f"n{i}").build() for i in (1, 2, 3)],
    [
        a_pod("big1", "team-b").gpus(8).on("n1", range(8)).build(),
        a_pod("big2", "team-b").gpus(8).on("n2", range(8)).build(),
        a_pod("mid", "team-b").gpus(6).on("n3", range(6)).build(),
        a_pod("p", "team-a").gpus(4).build(),
    ],
)
ALICE = "system:serviceaccount:team-a:alice"


def reviewing(tokens: Mapping[str, str], grants: Mapping[str, set[str]], *, down: bool = False) -> FakeApi:
    """The API server's reviews: ``tokens`` (token -> user), each user allowed ``grants`` (namespaces)."""

    def review(sent: Sent) -> JsonObject:
        assert sent.method == "POST"
        if down:
            raise UnavailableError(0, "Unavailable", "connection refused")
        body = sent.body
        if sent.path == TOKEN_REVIEWS:
            user = tokens.get(body["spec"]["token"])
            status = {"authenticated": True, "user": {"username": user, "groups": ["system:authenticated"]}}
            return {"status": status if user else {"authenticated": False}}
        assert sent.path == ACCESS_REVIEWS
        spec = body["spec"]
        allowed = spec["resourceAttributes"]["namespace"] in grants.get(spec["user"], set())
        return {"status": {"allowed": allowed, "reason": "" if allowed else "no RBAC policy matched"}}

    return FakeApi(answer=review, read_only=False)


def endpoint(reviews: FakeApi, clock: FakeClock | None = None) -> Visibility:
    limit = QuestionLimit(QUESTIONS_PER_MINUTE, QUESTION_BURST, clock=clock or FakeClock(100.0))
    return Visibility(reviews, lambda: SNAPSHOT, clock=lambda: 1.0, limit=limit)


def request(path: str, token: str | None = "t-alice") -> Request:
    headers = (("authorization", f"Bearer {token}"),) if token else ()
    return Request("GET", path, headers, b"", None, ("127.0.0.1", 9444), "https")


def ask(reviews: FakeApi, path: str, token: str | None = "t-alice") -> tuple[int, bytes]:
    reply = endpoint(reviews).answer(request(path, token))
    return reply.status, reply.body


def alice() -> FakeApi:
    return reviewing({"t-alice": ALICE}, {ALICE: {"team-a"}})


def test_a_member_gets_the_explanation_of_their_pod_without_other_namespaces() -> None:
    reviews = alice()
    status, body = ask(reviews, "/why/namespaces/team-a/pods/p")
    assert status == 200, body
    answer = orjson.loads(body)
    assert answer["cause"] == "no_capacity"
    assert answer["whatIf"]["finished"] == [OTHER]
    assert b"team-b" not in body
    assert answer["about"] == [["Pod", "p"]]
    access = reviews.sent[1].body["spec"]
    assert access["user"] == ALICE
    assert access["resourceAttributes"] == {
        "namespace": "team-a",
        "verb": "get",
        "group": "",
        "resource": "pods",
        "name": "p",
    }


@pytest.mark.parametrize(
    ("path", "token", "status", "words"),
    [
        (
            "/why/namespaces/team-b/pods/mid",
            "t-alice",
            403,
            f'{ALICE} may not get pods "mid" in namespace team-b',
        ),
        ("/why/namespaces/team-b/podgroups/g", "t-alice", 403, "may not get podgroups.scheduling.x-k8s.io"),
        ("/why/namespaces/team-a/pods/p", None, 401, "bearer token"),
        ("/why/namespaces/team-a/pods/p", "stolen", 401, "does not accept this token"),
        ("/why/namespaces/team-a/pods/nobody", "t-alice", 404, "team-a/nobody"),
        ("/why/namespaces/team-a/secrets/x", "t-alice", 400, "GET /why/namespaces/NAMESPACE/pods/NAME"),
        ("/why/namespaces/Team_A/pods/p", "t-alice", 400, "GET /why/namespaces"),
    ],
)
def test_every_refusal_says_why(path: str, token: str | None, status: int, words: str) -> None:
    got, body = ask(alice(), path, token)
    assert (got, words in body.decode()) == (status, True), body


def test_an_api_server_it_cannot_reach_is_a_503_with_the_reason_not_a_crash() -> None:
    status, body = ask(reviewing({}, {}, down=True), "/why/namespaces/team-a/pods/p")
    assert status == 503
    assert b"connection refused" in body


def test_paths_name_a_pod_or_a_podgroup() -> None:
    question = parse("/why/namespaces/ml/podgroups/llama")
    assert question is not None
    assert (question.target.kind, question.group, question.resource) == (
        "podgroup",
        "scheduling.x-k8s.io",
        "podgroups",
    )


def test_a_user_asking_in_a_loop_is_slowed_down_and_others_are_not() -> None:
    reviews = reviewing({"t-alice": ALICE, "t-bob": "bob"}, {ALICE: {"team-a"}, "bob": {"team-a"}})
    clock = FakeClock(100.0)
    visibility = endpoint(reviews, clock)
    path = "/why/namespaces/team-a/pods/p"
    statuses = [visibility.answer(request(path)).status for _ in range(QUESTION_BURST + 1)]
    assert statuses == [200] * QUESTION_BURST + [429]
    refused = visibility.answer(request(path))
    assert refused.body == f"too many questions from {ALICE}: at most 30 a minute; ask again in 2 s".encode()
    assert ("retry-after", "2") in refused.headers
    assert visibility.answer(request(path, "t-bob")).status == 200  # another user is answered
    clock.now += 2.0  # one question's worth of refill
    assert visibility.answer(request(path)).status == 200
    assert visibility.answer(request(path)).status == 429
