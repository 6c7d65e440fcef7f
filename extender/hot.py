"""The hot verbs without Flask: ``filter`` and ``prioritize`` read with msgspec and answered straight away.

kube-scheduler calls these two once per pod each, on its serial path, while the request waits; Flask and
werkzeug (request and response objects, routing, the WSGI environ) cost about a millisecond of GIL per
call there (the per-pod budget in hack/perf/README.md), and decoding the whole pod into Python objects
for a memo that only needs its bytes costs more. ``kubeio.serving`` has the whole request in hand before
a thread runs it, so this module answers the two verbs from the buffered body:

- the body is read into msgspec structs (``ExtenderArgs`` with the pod and the names kept as raw JSON
  bytes), the pod converted once per distinct text (``RawPodMemo``), the node names checked by
  ``extender.wire`` once per distinct list (``NamesMemo``);
- the decision, the metrics and the reply are the Flask route's own (``extender.routes.answer`` and
  ``decide_filter``), and the reply is encoded from msgspec structs (``ExtenderFilterResult``).

Anything the fast reading does not take as an ordinary ``nodeCacheCapable`` request (a body that is no
such object, ``Nodes`` set, a pod the converter refuses, a node name that is not a DNS name) goes to the
Flask route unchanged (``None`` here), so every refusal keeps its wording and status, and the hot path
never answers differently from it (``tests/extender/test_hot.py`` compares the two on random requests).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from extender import routes, wire
from extender.duty import Duty
from extender.extender_metrics import ExtenderMetrics
from extender.service import Extender
from kubeio.convert import ConvertError, pod_from_api
from kubeio.serving import Reply, Request
from scheduling.model import Pod

JSON = (("content-type", "application/json"),)


class ExtenderArgs(msgspec.Struct, frozen=True):
    """``k8s.io/kube-scheduler/extender/v1.ExtenderArgs`` in the ``nodeCacheCapable`` shape."""

    Pod: msgspec.Raw
    NodeNames: msgspec.Raw = msgspec.Raw(b"null")
    Nodes: msgspec.Raw = msgspec.Raw(b"null")


class ExtenderFilterResult(msgspec.Struct, frozen=True, omit_defaults=False):
    """``ExtenderFilterResult`` with node names (``Nodes`` is always null in this shape)."""

    NodeNames: list[str]
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str = ""
    Nodes: None = None


class HostPriority(msgspec.Struct, frozen=True):
    """One entry of a ``HostPriorityList``."""

    Host: str
    Score: int


_decode_args = msgspec.json.Decoder(ExtenderArgs).decode
_decode_names = msgspec.json.Decoder(list[str]).decode
_encode = msgspec.json.Encoder().encode


class RawPodMemo:
    """The pod of a request's raw ``Pod`` bytes, and why it keeps the ranked path, remembered by those bytes.

    kube-scheduler sends the same pod, byte for byte, to ``filter`` and ``prioritize`` of one cycle and
    on every retry; the bytes are the key, so a hit is the very JSON text converted before. Refused pods
    are not remembered. Safe to share between request threads.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._seen: OrderedDict[bytes, tuple[Pod, str]] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, raw: bytes) -> tuple[Pod, str] | None:
        """(pod, ranked-path reason), or ``None`` when the pod is not one the converter takes."""
        with self._lock:
            hit = self._seen.get(raw)
            if hit is not None:
                self._seen.move_to_end(raw)
                return hit
        try:
            value = orjson.loads(raw)
            orjson.dumps(value)  # what the Flask route's memo refuses (nested too deeply), it refuses
            found = (pod_from_api(value), wire.ranked_path_reason(value))
        except (orjson.JSONDecodeError, orjson.JSONEncodeError, ConvertError):
            return None
        with self._lock:
            self._seen[raw] = found
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)
        return found


class NamesMemo:
    """The candidates of the last ``NodeNames`` text read, checked, as one tuple object.

    Consecutive pods mostly get the very same candidate list (every node that passed kube-scheduler's
    own filters); comparing its text with the last one's is a memory compare, while reading and checking
    5,000 names again is not. Giving back the same tuple object also lets the decisive chooser keep the
    set it made of it (``extender.service``). Safe to share between request threads.
    """

    def __init__(self) -> None:
        self._last: tuple[bytes, tuple[str, ...]] = (b"", ())

    def __call__(self, raw: bytes) -> tuple[str, ...] | None:
        """The checked names of ``raw`` (a JSON list), or ``None`` when the Flask route must answer."""
        text, names = self._last
        if raw == text:
            return names
        try:
            names = wire.node_names(_decode_names(raw))
        except (msgspec.DecodeError, msgspec.ValidationError, wire.WireError):
            return None
        self._last = (raw, names)
        return names


def _args(body: bytes, pods: RawPodMemo, candidates: NamesMemo) -> wire.ExtenderArgs | None:
    """The request as ``extender.wire`` would parse it, or ``None`` for anything but the ordinary shape."""
    try:
        raw = _decode_args(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if bytes(raw.Nodes).strip() != b"null":
        return None
    names = candidates(bytes(raw.NodeNames))
    if not names:
        return None
    found = pods(bytes(raw.Pod))
    if found is None:
        return None
    pod, ranked = found
    return wire.ExtenderArgs(pod, names, None, ranked)


def _reply(status: int, body: Any) -> Reply:
    if status != 200:
        return Reply(status, JSON, orjson.dumps(body))
    if isinstance(body, dict):  # a filter result in the names shape
        result = ExtenderFilterResult(
            body["NodeNames"], body["FailedNodes"], body["FailedAndUnresolvableNodes"], body["Error"]
        )
        return Reply(200, JSON, _encode(result))
    return Reply(200, JSON, _encode([HostPriority(e["Host"], e["Score"]) for e in body]))


def front_handler(app: Any, fallback: Callable[[Request], Reply]) -> Callable[[Request], Reply]:
    """The handler ``extender.worker`` serves ``app`` with: its ``extensions["front"]`` hook, if it has one.

    ``extender.app.create_app`` sets the hook to ``hot_handler`` over its service; an app without the hook
    (a test app, the bench's null extender in Flask) is served through ``fallback`` alone.
    """
    hook = getattr(app, "extensions", {}).get("front")
    return fallback if hook is None else hook(fallback)


def hot_handler(
    service: Extender,
    metrics: ExtenderMetrics,
    duty: Duty | None,
    fallback: Callable[[Request], Reply],
) -> Callable[[Request], Reply]:
    """A ``kubeio.serving`` handler: ``POST /filter`` and ``/prioritize`` here, the rest ``fallback``."""
    pods, candidates = RawPodMemo(), NamesMemo()

    def handle(request: Request) -> Reply:
        verb = _HOT.get((request.method, request.target))
        if verb is None:
            return fallback(request)
        args = _args(request.body, pods, candidates)
        if args is None:
            return fallback(request)  # the Flask route refuses it in its own words
        if duty is not None:
            duty.called()
        if verb == "filter":
            status, body = routes.answer(verb, metrics, lambda: routes.decide_filter(service, metrics, args))
        else:
            status, body = routes.answer(
                verb,
                metrics,
                lambda: wire.host_priority_list(service.prioritize(args.pod, args.node_names)),
            )
        return _reply(status, body)

    return handle


_HOT = {("POST", "/filter"): "filter", ("POST", "/prioritize"): "prioritize"}
