"""Who is asking, and may they: a bearer token checked by the API server (TokenReview, SubjectAccessReview).

A server outside the API server that answers users (the placement manager's visibility endpoint) must
decide as the API server would. It never reads the token itself: a TokenReview asks the API server who
the token belongs to (any authenticator the cluster runs: service-account tokens, OIDC, webhook), and a
SubjectAccessReview asks whether that user may do one thing (RBAC, or whatever authorizer the cluster
runs). This is what ``kube-rbac-proxy`` and the aggregated API servers' delegated authentication do; the
caller needs the ClusterRole ``system:auth-delegator``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeio.http import JsonRequester

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated user, as the API server knows them.

    Attributes:
        username: the user's name (``system:serviceaccount:NS:NAME`` for a service account).
        uid: the user's UID, if any.
        groups: the groups the user is in.
        extra: further attributes the authenticator gave (scopes, the token's pod, ...).
    """

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The API server's answer to "may they?": allowed or not, and its reason when it gives one."""

    allowed: bool
    reason: str = ""


def authenticate(http: JsonRequester, token: str, timeout: float = 10.0) -> Caller | None:
    """The user ``token`` belongs to, or ``None`` when the API server does not accept it.

    Raises:
        KubeError: the review could not be made (the API server unreachable, or this client not allowed).
    """
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    answer = http.request("POST", TOKEN_REVIEWS, body=review, timeout=timeout)
    status = answer.get("status") or {}
    user = status.get("user") or {}
    if not status.get("authenticated") or not user.get("username"):
        return None
    extra = {str(k): [str(v) for v in values] for k, values in (user.get("extra") or {}).items()}
    return Caller(str(user["username"]), str(user.get("uid") or ""), tuple(user.get("groups") or ()), extra)


def may(
    http: JsonRequester,
    caller: Caller,
    *,
    verb: str,
    resource: str,
    namespace: str,
    name: str = "",
    group: str = "",
    timeout: float = 10.0,
) -> Verdict:
    """Whether ``caller`` may ``verb`` the ``resource`` (of API ``group``) ``name`` in ``namespace``.

    Raises:
        KubeError: the review could not be made.
    """
    attributes = {"namespace": namespace, "verb": verb, "group": group, "resource": resource}
    if name:
        attributes["name"] = name
    spec: dict[str, object] = {"user": caller.username, "groups": list(caller.groups)}
    if caller.uid:
        spec["uid"] = caller.uid
    if caller.extra:
        spec["extra"] = caller.extra
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {**spec, "resourceAttributes": attributes},
    }
    status = http.request("POST", ACCESS_REVIEWS, body=review, timeout=timeout).get("status") or {}
    allowed = bool(status.get("allowed")) and not status.get("denied")
    return Verdict(allowed, str(status.get("reason") or status.get("evaluationError") or ""))
