"""Read Kubernetes Events back: what phalanx and kube-scheduler told the user about an object.

Every "no" phalanx says ends up on an Event (a member's ``FailedScheduling`` from kube-scheduler with the
extender's sentence, a PodGroup's ``GangWaiting`` or ``QueueHold`` from the extender); the command-line
tool shows them beside the state. Events are written two ways (``events.k8s.io/v1`` by kube-scheduler,
``v1`` by phalanx), which the core API shows with different time fields; :func:`event_from_api` reads
either into one record, and the newest time it carries orders them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kubeio.http import JsonObject, JsonRequester
from kubeio.reflector import Collection, list_collection


@dataclass(frozen=True, slots=True)
class EventInfo:
    """One Event, as a user reads it.

    Attributes:
        namespace: the event's (and its object's) namespace.
        kind: the kind of the object it is about (``Pod``, ``PodGroup``, ...).
        name: that object's name.
        uid: that object's UID (empty when the writer left it out).
        type: ``Normal`` or ``Warning``.
        reason: a short CamelCase word (``FailedScheduling``, ``GangWaiting``).
        message: the sentence.
        count: how many times it was seen (1 when the writer keeps no count).
        last_seen: RFC 3339 time it was last seen (sorts chronologically; empty when unknown).
        component: who wrote it (``default-scheduler``, ``phalanx``, ...).
    """

    namespace: str
    kind: str
    name: str
    uid: str
    type: str
    reason: str
    message: str
    count: int
    last_seen: str
    component: str

    @property
    def object_key(self) -> str:
        """``namespace/name`` of the object the event is about."""
        return f"{self.namespace}/{self.name}"


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _object(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def event_from_api(raw: Mapping[str, Any]) -> EventInfo:
    """Read one ``v1`` Event (however it was written); missing fields read as empty.

    >>> e = event_from_api({"involvedObject": {"kind": "Pod", "namespace": "ml", "name": "w0"},
    ...     "reason": "FailedScheduling", "message": "0/3 nodes", "eventTime": "2030-01-01T00:00:01.5Z",
    ...     "series": {"count": 4, "lastObservedTime": "2030-01-01T00:05:00.1Z"}})
    >>> e.object_key, e.count, e.last_seen
    ('ml/w0', 4, '2030-01-01T00:05:00.100000Z')
    """
    involved = _object(raw.get("involvedObject") or raw.get("regarding"))
    meta, series, source = (
        _object(raw.get("metadata")),
        _object(raw.get("series")),
        _object(raw.get("source")),
    )
    times = [
        _text(series.get("lastObservedTime")),
        _text(raw.get("lastTimestamp")),
        _text(raw.get("eventTime")),
        _text(raw.get("firstTimestamp")),
        _text(meta.get("creationTimestamp")),
    ]
    count = series.get("count") if series else raw.get("count")
    return EventInfo(
        namespace=_text(involved.get("namespace")) or _text(meta.get("namespace")),
        kind=_text(involved.get("kind")),
        name=_text(involved.get("name")),
        uid=_text(involved.get("uid")),
        type=_text(raw.get("type")),
        reason=_text(raw.get("reason")),
        message=_text(raw.get("message") or raw.get("note")),
        count=count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1,
        last_seen=max((_normal_time(t) for t in times if t), default=""),
        component=_text(raw.get("reportingComponent")) or _text(source.get("component")),
    )


def _normal_time(text: str) -> str:
    """RFC 3339 with a fraction always (``...:05Z`` -> ``...:05.000000Z``), so times compare as text."""
    if text.endswith("Z") and "." not in text:
        return text[:-1] + ".000000Z"
    if text.endswith("Z"):
        whole, fraction = text[:-1].split(".", 1)
        return f"{whole}.{fraction[:6].ljust(6, '0')}Z"
    return text


def _sort_key(event: EventInfo) -> tuple[str, str, str, str]:
    return (event.last_seen, event.kind, event.object_key, event.reason)


def list_events(
    http: JsonRequester, *, namespace: str | None = None, field_selector: str = ""
) -> list[EventInfo]:
    """Every Event of ``namespace`` (all namespaces if ``None``) matching ``field_selector``, oldest first.

    ``field_selector`` takes the API's Event fields, e.g. ``reason=FailedScheduling`` or
    ``involvedObject.kind=PodGroup``.

    Raises:
        KubeError: the list failed.
    """
    path = f"/api/v1/namespaces/{quote(namespace, safe='')}/events" if namespace else "/api/v1/events"
    items: list[JsonObject] = list_collection(http, Collection(path, field_selector=field_selector))[0]
    return sorted((event_from_api(raw) for raw in items), key=_sort_key)
