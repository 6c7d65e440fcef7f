"""The kube-scheduler extender v1 wire format: parse requests, render replies.

Field names are the capitalised Go field names (``k8s.io/kube-scheduler/extender/v1`` has no json
tags; docs/design/extender-protocol.md §1). kube-scheduler sends every key, with ``null`` for unused ones.
Anything that does not match raises ``WireError``, which the routes answer with HTTP 400 and the message.

What kube-scheduler never sends is refused here, before the service sees it:

- names that Kubernetes would not accept: a node name or pod name that is no DNS-1123 subdomain, a
  namespace that is no DNS-1123 label (``..`` or ``a/b`` would otherwise reach an API path). A reason
  quotes at most ``SHOWN`` characters of what it refuses, so a 1 MB name is neither echoed nor logged;
- a filter or prioritize request with no candidate node: kube-scheduler calls an extender only with
  candidates (``findNodesThatPassExtenders`` stops at zero feasible nodes, and a single feasible node is
  never prioritized), so ``NodeNames`` empty or null with ``Nodes`` null or ``{"items": null}`` is bad
  input, not "nothing fits";
- JSON nested deeper than orjson can write back (254 levels; orjson reads up to 1,024): a pod or node
  object is re-encoded (the pod memo's key, the filter reply's nodes), so such a request would
  otherwise fail after the service acted. A real object is about a dozen levels deep.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kubeio.convert import ConvertError, pod_from_api
from scheduling.model import Pod
from scheduling.reasons import Code, Rejection


class WireError(ValueError):
    """A request that is not a valid extender request; the message says what is wrong."""


SHOWN = 80
"""Characters of a refused value quoted in a reason (and so in the log)."""

_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_SUBDOMAINS = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*\n)*{_LABEL}(?:\.{_LABEL})*")
_NAMESPACE = re.compile(_LABEL)
MAX_NAME = 253
"""Longest DNS-1123 subdomain: the longest name of a node or a pod."""
MAX_UID = 128
"""Longest UID accepted (the API server writes 36-character UUIDs)."""


def shown(value: object) -> str:
    """``repr(value)`` cut to ``SHOWN`` characters, with a marker saying how long it was."""
    text = repr(value)
    if len(text) <= SHOWN:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as text"
    return f"{text[:SHOWN]}... ({size})"


def _dns_name(value: str, key: str, what: str) -> str:
    pattern = _NAMESPACE if what == "namespace" else _SUBDOMAIN
    limit = 63 if what == "namespace" else MAX_NAME
    if len(value) > limit or not pattern.fullmatch(value):
        kind = "label" if what == "namespace" else "subdomain"
        msg = (
            f"{key!r}: {shown(value)} is not a valid {what} (a DNS-1123 {kind} of at most {limit} characters)"
        )
        raise WireError(msg)
    return value


@dataclass(frozen=True, slots=True)
class ExtenderArgs:
    """A filter or prioritize request.

    Attributes:
        pod: the pod being scheduled.
        node_names: candidate node names, in kube-scheduler's order.
        nodes: the full node objects by name when kube-scheduler sent ``Nodes``
            (``nodeCacheCapable: false``); ``None`` when it sent ``NodeNames``.
    """

    pod: Pod
    node_names: tuple[str, ...]
    nodes: Mapping[str, Any] | None
    ranked: str = ""
    """Why this pod keeps the ranked path (``ranked_path_reason``); empty: phalanx may decide alone."""


@dataclass(frozen=True, slots=True)
class BindingArgs:
    """A bind request."""

    pod_name: str
    pod_namespace: str
    pod_uid: str
    node: str


@dataclass(frozen=True, slots=True)
class PreemptionArgs:
    """A preempt request: victim pod UIDs per candidate node, and their PDB violation counts."""

    pod: Pod
    victims: Mapping[str, tuple[tuple[str, ...], int]]


def decode(body: bytes) -> dict[str, Any]:
    """Decode a request body that must be a JSON object."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        msg = f"request body is not valid JSON: {exc}"
        raise WireError(msg) from None
    if not isinstance(value, dict):
        msg = f"request body must be a JSON object, got {type(value).__name__}"
        raise WireError(msg)
    return value


def _require(body: Mapping[str, Any], key: str) -> Any:
    if key not in body:
        msg = f"request has no {key!r} field"
        raise WireError(msg)
    return body[key]


def _string(body: Mapping[str, Any], key: str) -> str:
    value = _require(body, key)
    if not isinstance(value, str) or not value:
        msg = f"{key!r} must be a non-empty string"
        raise WireError(msg)
    return value


PodReader = Callable[[object], Pod]
"""Turns a request's ``Pod`` JSON into the core's ``Pod`` (``pod_from_api``, or a ``PodMemo``)."""


class PodMemo:
    """``pod_from_api`` that remembers the last pods it read, by their JSON text.

    kube-scheduler sends the same pod to ``filter`` and then to ``prioritize`` within one scheduling
    cycle, and again on every retry; converting it costs about 0.1 ms a call. A pod is remembered under
    ``orjson.dumps`` of what the request held, so only the very same JSON value (types included: ``1``,
    ``1.0`` and ``true`` differ there) gets the ``Pod`` read before, which is the ``Pod`` it would convert
    to again. Invalid pods are not remembered. Safe to share between request threads.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._seen: OrderedDict[bytes, Pod] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, raw: object) -> Pod:
        """The pod of ``raw`` (the request's ``Pod`` value).

        Raises:
            ConvertError: ``raw`` is not a valid pod.
        """
        try:
            key = orjson.dumps(raw)
        except orjson.JSONEncodeError as exc:  # nested deeper than orjson writes
            msg = f"the pod cannot be re-encoded: {exc}"
            raise ConvertError(msg) from None
        with self._lock:
            pod = self._seen.get(key)
            if pod is not None:
                self._seen.move_to_end(key)
                return pod
        pod = pod_from_api(raw)
        with self._lock:
            self._seen[key] = pod
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return pod


def _pod(body: Mapping[str, Any], read: PodReader = pod_from_api) -> Pod:
    try:
        return read(_require(body, "Pod"))
    except ConvertError as exc:
        msg = f"'Pod' is not a valid pod: {exc}"
        raise WireError(msg) from None


def _names(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    # C-level scans instead of a Python loop over up to 5,000 names per request: the types, the
    # longest name, then one regular expression over the names joined by newlines, which no name may
    # hold (the count of newlines proves it).
    if not isinstance(value, list) or not set(map(type, value)) <= {str} or "" in value:
        msg = f"{key!r} must be a list of node names or null"
        raise WireError(msg)
    joined = "\n".join(value)
    if value and (
        max(map(len, value)) > MAX_NAME
        or joined.count("\n") != len(value) - 1
        or not _SUBDOMAINS.fullmatch(joined)
    ):
        bad = next(n for n in value if len(n) > MAX_NAME or not _SUBDOMAIN.fullmatch(n))
        _dns_name(bad, key, "node name")
    return tuple(value)


def node_names(value: list[str]) -> tuple[str, ...]:
    """A request's ``NodeNames`` list, checked as ``parse_extender_args`` checks it.

    Raises:
        WireError: a name is not a DNS-1123 subdomain, or the list is empty.
    """
    names = _names(value, "NodeNames")
    if not names:
        msg = "request names no candidate node (kube-scheduler always sends at least one)"
        raise WireError(msg)
    return names


def _node_json(item: object, where: str) -> orjson.Fragment:
    """A node of ``Nodes``, encoded once here: the filter reply sends it back as it came."""
    try:
        return orjson.Fragment(orjson.dumps(item))
    except orjson.JSONEncodeError as exc:
        msg = f"{where} cannot be re-encoded: {exc}"
        raise WireError(msg) from None


SPREAD_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "ReplicationController"})
"""Owners whose pods kube-scheduler spreads by default (``PodTopologySpread``'s system defaults,
``ScheduleAnyway`` over hostnames and zones, for pods a ReplicaSet, StatefulSet or ReplicationController
selects)."""


def ranked_path_reason(raw: object) -> str:
    """Why kube-scheduler's in-tree scores must still rank this pod's nodes, or "" when nothing does.

    A decisive filter (``scheduling.nodes.decisive``) answers with one node, and kube-scheduler then runs
    no Score plugin. That is right only when those plugins would add nothing phalanx does not model:
    not for a pod with a preferred node affinity, a preferred pod affinity or anti-affinity, a
    ``ScheduleAnyway`` topology spread constraint, or the default spreading of a ReplicaSet's,
    StatefulSet's or ReplicationController's pods. Read from the request's pod JSON (``raw`` is valid:
    the pod was converted first), so the core's ``Pod`` needs no fields only this check reads.
    """
    if not isinstance(raw, dict):
        return ""
    spec = raw.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    affinity = spec.get("affinity")
    if isinstance(affinity, dict):
        node = affinity.get("nodeAffinity")
        if isinstance(node, dict) and node.get("preferredDuringSchedulingIgnoredDuringExecution"):
            return "preferred node affinity"
        for kind in ("podAffinity", "podAntiAffinity"):
            terms = affinity.get(kind)
            if isinstance(terms, dict) and terms.get("preferredDuringSchedulingIgnoredDuringExecution"):
                return f"preferred {kind}"
    spread = spec.get("topologySpreadConstraints")
    if isinstance(spread, list):
        for item in spread:
            if isinstance(item, dict) and item.get("whenUnsatisfiable") == "ScheduleAnyway":
                return "ScheduleAnyway topology spread"
        if spread:
            return ""  # explicit constraints replace the system defaults
    meta = raw.get("metadata")
    owners = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if isinstance(owners, list):
        for owner in owners:
            if isinstance(owner, dict) and owner.get("kind") in SPREAD_OWNERS:
                return f"default spreading of a {owner.get('kind')}'s pods"
    return ""


def parse_extender_args(body: Mapping[str, Any], read_pod: PodReader = pod_from_api) -> ExtenderArgs:
    """Parse a filter/prioritize request in either ``nodeCacheCapable`` mode (the pod by ``read_pod``)."""
    pod = _pod(body, read_pod)
    ranked = ranked_path_reason(body.get("Pod"))
    if "NodeNames" not in body and "Nodes" not in body:
        msg = "request has neither 'NodeNames' nor 'Nodes'"
        raise WireError(msg)
    names = _names(body.get("NodeNames"), "NodeNames")
    raw_nodes = body.get("Nodes")
    # A wrongly typed NodeList is bad input, not an empty one: read as "no nodes" it would answer 200
    # with nothing feasible, and the pod would wait for nothing. Checked even when NodeNames is used.
    items = raw_nodes.get("items") if isinstance(raw_nodes, dict) else None
    if raw_nodes is not None and (not isinstance(raw_nodes, dict) or not isinstance(items, list | None)):
        got = type(raw_nodes if not isinstance(raw_nodes, dict) else items).__name__
        msg = f"'Nodes' must be a NodeList object with a list of 'items' or null, got {got}"
        raise WireError(msg)
    if body.get("NodeNames") is not None or raw_nodes is None:
        if not names:
            msg = "request names no candidate node (kube-scheduler always sends at least one)"
            raise WireError(msg)
        return ExtenderArgs(pod, names, None, ranked)
    if not items:
        msg = "request names no candidate node: 'Nodes.items' is empty or null"
        raise WireError(msg)
    nodes: dict[str, Any] = {}
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            msg = f"'Nodes.items[{i}]' has no metadata.name"
            raise WireError(msg)
        nodes[_dns_name(name, f"Nodes.items[{i}].metadata.name", "node name")] = _node_json(
            item, f"'Nodes.items[{i}]'"
        )
    return ExtenderArgs(pod, tuple(nodes), nodes, ranked)


def parse_binding_args(body: Mapping[str, Any]) -> BindingArgs:
    """Parse a bind request; the names must be names Kubernetes accepts (they end up in API paths)."""
    uid = _string(body, "PodUID")
    if len(uid) > MAX_UID:
        msg = f"'PodUID' must be a UID of at most {MAX_UID} characters, got {shown(uid)}"
        raise WireError(msg)
    return BindingArgs(
        pod_name=_dns_name(_string(body, "PodName"), "PodName", "pod name"),
        pod_namespace=_dns_name(_string(body, "PodNamespace"), "PodNamespace", "namespace"),
        pod_uid=uid,
        node=_dns_name(_string(body, "Node"), "Node", "node name"),
    )


def _victims(value: object, key: str, node: str) -> tuple[tuple[str, ...], int]:
    if not isinstance(value, dict):
        msg = f"{key}[{node!r}] must be an object"
        raise WireError(msg)
    pods = value.get("Pods")
    violations = value.get("NumPDBViolations", 0)
    if not isinstance(violations, int) or isinstance(violations, bool):
        msg = f"{key}[{node!r}].NumPDBViolations must be an integer"
        raise WireError(msg)
    if pods is None:
        pods = []
    if not isinstance(pods, list):
        msg = f"{key}[{node!r}].Pods must be a list"
        raise WireError(msg)
    uids: list[str] = []
    for i, pod in enumerate(pods):
        uid = pod.get("UID") if key == "NodeNameToMetaVictims" and isinstance(pod, dict) else None
        if key == "NodeNameToVictims" and isinstance(pod, dict):
            meta = pod.get("metadata")
            uid = meta.get("uid") if isinstance(meta, dict) else None
        if not isinstance(uid, str) or not uid or len(uid) > MAX_UID:
            msg = f"{key}[{node!r}].Pods[{i}] has no UID of at most {MAX_UID} characters"
            raise WireError(msg)
        uids.append(uid)
    return tuple(uids), violations


def parse_preemption_args(body: Mapping[str, Any]) -> PreemptionArgs:
    """Parse a preempt request; full victim pods (``NodeNameToVictims``) are reduced to UIDs."""
    pod = _pod(body)
    key = "NodeNameToMetaVictims" if body.get("NodeNameToMetaVictims") is not None else "NodeNameToVictims"
    if "NodeNameToMetaVictims" not in body and "NodeNameToVictims" not in body:
        msg = "request has neither 'NodeNameToMetaVictims' nor 'NodeNameToVictims'"
        raise WireError(msg)
    raw = body.get(key)
    if raw is None:
        return PreemptionArgs(pod, {})
    if not isinstance(raw, dict):
        msg = f"{key!r} must be an object keyed by node name"
        raise WireError(msg)
    return PreemptionArgs(
        pod, {_dns_name(node, key, "node name"): _victims(v, key, node) for node, v in raw.items()}
    )


def filter_result(
    args: ExtenderArgs, feasible: Sequence[str], rejected: Mapping[str, Rejection], error: str = ""
) -> dict[str, Any]:
    """An ``ExtenderFilterResult`` in the same mode as the request (names, or full nodes).

    The turned-down nodes' reasons are sent only when no node passes. kube-scheduler keeps the nodes
    the reply lists as feasible and records the failed ones' reasons only as the diagnosis of a pod
    that ends up unschedulable (``findNodesThatPassExtenders``: ``feasibleNodes = feasibleList``; the
    statuses feed the FitError and preemption's candidates, used only when no node is feasible). When
    a node passes, those reasons are never read, and they are most of the reply exactly where the reply
    is largest: a gang member with a reservation passes on one node and is turned down on every other
    (4,999 sentences at 5,000 nodes, for kube-scheduler to decode on its serial path).
    """
    if feasible:
        failed: dict[str, str] = {}
        unresolvable: dict[str, str] = {}
    else:
        failed = {n: r.message for n, r in rejected.items() if r.code is Code.UNSCHEDULABLE}
        unresolvable = {n: r.message for n, r in rejected.items() if r.code is Code.UNRESOLVABLE}
    if args.nodes is None:
        return {
            "Nodes": None,
            "NodeNames": list(feasible),
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": error,
        }
    return {
        "Nodes": {"metadata": {}, "items": [args.nodes[n] for n in feasible]},
        "NodeNames": None,
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": error,
    }


def host_priority_list(scores: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """A ``HostPriorityList`` (a bare JSON array of integer scores), shifted down to its lowest score.

    kube-scheduler adds ``score x weight x 10`` of every listed host to that host's total and adds
    nothing for a host the reply leaves out (``prioritizeNodes`` in ``schedule_one.go``). Subtracting
    the lowest score from every candidate's lowers every total by the same amount, so the order of the
    totals is unchanged, and a host then at 0 adds exactly what leaving it out adds. The reply lists
    only the hosts above the lowest score, in the order given: on a cluster of mostly empty (or mostly
    alike) nodes that is a handful of entries instead of one per candidate, which both sides would
    otherwise encode and decode on kube-scheduler's serial path (``hack/perf/README.md``: about 1.9 ms per pod
    here at 1,000 candidates).

    One thing moves, and only within kube-scheduler's own random choice: among hosts tied at the
    highest total it draws a random key for each host an extender listed and leaves 0 for the others,
    so a listed host wins such a tie. The host picked is always one the full reply could have led to
    (``tests/extender/test_priority_reply.py`` checks this against a model of kube-scheduler's
    combination on random clusters), and a tie won by a host phalanx ranks above the lowest is the
    better pick for it.
    """
    if not scores:
        return []
    lowest = min(score for _, score in scores)
    return [{"Host": host, "Score": score - lowest} for host, score in scores if score > lowest]


def binding_result(error: str) -> dict[str, Any]:
    """An ``ExtenderBindingResult``; an empty ``Error`` means success."""
    return {"Error": error}


def preemption_result(victims: Mapping[str, tuple[tuple[str, ...], int]]) -> dict[str, Any]:
    """An ``ExtenderPreemptionResult``, always in the meta (UID) form."""
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": violations}
            for node, (uids, violations) in victims.items()
        }
    }
