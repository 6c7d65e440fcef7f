"""The kube-scheduler extender v1 wire format: parse requests, render replies.

Field names are the capitalised Go field names (``k8s.io/kube-scheduler/extender/v1`` has no json
tags; extender-protocol.md §1). kube-scheduler sends every key, with ``null`` for unused ones. Anything
that does not match raises ``WireError``, which the routes answer with HTTP 400 and the message.
"""

from __future__ import annotations

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
        key = orjson.dumps(raw)
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
    # Two C-level scans instead of a Python loop over up to 5,000 names per request.
    if not isinstance(value, list) or not set(map(type, value)) <= {str} or "" in value:
        msg = f"{key!r} must be a list of node names or null"
        raise WireError(msg)
    return tuple(value)


def parse_extender_args(body: Mapping[str, Any], read_pod: PodReader = pod_from_api) -> ExtenderArgs:
    """Parse a filter/prioritize request in either ``nodeCacheCapable`` mode (the pod by ``read_pod``)."""
    pod = _pod(body, read_pod)
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
        return ExtenderArgs(pod, names, None)
    nodes: dict[str, Any] = {}
    for i, item in enumerate(items or []):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            msg = f"'Nodes.items[{i}]' has no metadata.name"
            raise WireError(msg)
        nodes[name] = item
    return ExtenderArgs(pod, tuple(nodes), nodes)


def parse_binding_args(body: Mapping[str, Any]) -> BindingArgs:
    """Parse a bind request."""
    return BindingArgs(
        pod_name=_string(body, "PodName"),
        pod_namespace=_string(body, "PodNamespace"),
        pod_uid=_string(body, "PodUID"),
        node=_string(body, "Node"),
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
        if not isinstance(uid, str) or not uid:
            msg = f"{key}[{node!r}].Pods[{i}] has no UID"
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
    return PreemptionArgs(pod, {node: _victims(v, key, node) for node, v in raw.items()})


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
    otherwise encode and decode on kube-scheduler's serial path (issue 13's budget: about 1.9 ms per pod
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
