"""Events read back the same way whichever API wrote them, ordered by when they were last seen."""

from __future__ import annotations

from kubeio.event_read import event_from_api, list_events
from kubeio.http import JsonObject
from tests.kubeio.fake_api import FakeApi


def core_event(name: str, reason: str, last: str, *, kind: str = "Pod", count: int = 1) -> JsonObject:
    """An event as phalanx's recorder writes it (core v1: first/last timestamps, count, source)."""
    return {
        "metadata": {"name": f"{name}.{last}", "namespace": "ml", "creationTimestamp": last},
        "involvedObject": {"kind": kind, "namespace": "ml", "name": name, "uid": f"uid-{name}"},
        "type": "Warning",
        "reason": reason,
        "message": f"{reason} at {last}",
        "firstTimestamp": last,
        "lastTimestamp": last,
        "count": count,
        "source": {"component": "phalanx"},
    }


def series_event(name: str, created: str, last: str, count: int) -> JsonObject:
    """An event as kube-scheduler writes it through events.k8s.io/v1, seen through the core API."""
    return {
        "metadata": {"name": f"{name}.x", "namespace": "ml", "creationTimestamp": created},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": name},
        "type": "Warning",
        "reason": "FailedScheduling",
        "message": "0/3 nodes are available",
        "eventTime": created.replace("Z", ".123456Z"),
        "series": {"count": count, "lastObservedTime": last},
        "reportingComponent": "default-scheduler",
        "firstTimestamp": None,
        "lastTimestamp": None,
    }


def test_both_writers_read_into_one_record() -> None:
    core = event_from_api(core_event("w0", "GangWaiting", "2030-01-01T00:00:07Z", kind="PodGroup", count=3))
    assert (core.kind, core.object_key, core.reason, core.count, core.component) == (
        "PodGroup",
        "ml/w0",
        "GangWaiting",
        3,
        "phalanx",
    )
    assert core.last_seen == "2030-01-01T00:00:07.000000Z"
    series = event_from_api(series_event("w1", "2030-01-01T00:00:01Z", "2030-01-01T00:09:00.5Z", 12))
    assert (series.count, series.component, series.last_seen) == (
        12,
        "default-scheduler",
        "2030-01-01T00:09:00.500000Z",
    ), "the series' last observation, not its creation, is when it was last seen"
    empty = event_from_api({})
    assert (empty.kind, empty.name, empty.count, empty.last_seen) == ("", "", 1, "")


def test_events_are_ordered_by_last_seen_not_by_text_precision() -> None:
    events = [
        core_event("w0", "Late", "2030-01-01T00:00:05Z"),
        series_event("w0", "2030-01-01T00:00:01Z", "2030-01-01T00:00:04.9Z", 2),
        core_event("w0", "Early", "2030-01-01T00:00:03Z"),
    ]
    api = FakeApi({"/api/v1/namespaces/ml/events": events, "/api/v1/events": events})
    found = list_events(api, namespace="ml", field_selector="reason=FailedScheduling")
    assert [e.reason for e in found] == ["Early", "FailedScheduling", "Late"]
    assert api.queries[0] == (
        "/api/v1/namespaces/ml/events",
        {"fieldSelector": "reason=FailedScheduling", "limit": "500"},
    )
    assert len(list_events(api)) == 3
    assert api.queries[-1][0] == "/api/v1/events"
