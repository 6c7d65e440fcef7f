"""The event recorder: a repeat within a minute is suppressed, and what it remembers for that stays small."""

from __future__ import annotations

from kubeio.events import EventRecorder, ObjectRef
from tests.builders import FakeClock
from tests.kubeio.fake_api import FakeApi


def pod(i: int) -> ObjectRef:
    return ObjectRef("Pod", "v1", "ml", f"p{i}", f"uid-{i}")


def test_a_repeat_within_a_minute_is_suppressed_and_a_later_one_is_not() -> None:
    clock = FakeClock(1000.0)
    recorder = EventRecorder(None, clock=clock)  # type: ignore[arg-type]  # nothing is written here
    recorder.record(pod(0), "Normal", "AdmissionReleased", "released")
    recorder.record(pod(0), "Normal", "AdmissionReleased", "released")
    recorder.record(pod(0), "Normal", "AdmissionReleased", "released again")
    assert recorder._queue.qsize() == 2
    clock.now += 60
    recorder.record(pod(0), "Normal", "AdmissionReleased", "released")
    assert recorder._queue.qsize() == 3


def test_it_remembers_only_the_last_minute_of_events_however_many_objects_it_saw() -> None:
    clock = FakeClock(1000.0)
    recorder = EventRecorder(None, clock=clock, max_queue=1_000_000)  # type: ignore[arg-type]
    for minute in range(30):
        for i in range(1_000):
            recorder.record(pod(minute * 1_000 + i), "Normal", "AdmissionReleased", f"released {i}")
            clock.now += 0.06
    assert recorder._queue.qsize() == 30_000, "every distinct event is recorded"
    assert recorder.remembered <= 2_000, "about a minute's worth, not all 30,000"


def test_an_event_about_a_cluster_scoped_object_is_written_in_the_default_namespace() -> None:
    posts = FakeApi(read_only=False)
    recorder = EventRecorder(posts, clock=FakeClock(1000.0))  # type: ignore[arg-type]
    recorder.record(ObjectRef("Node", "v1", "", "big", "uid-big"), "Warning", "Refused", "too many GPUs")
    recorder.record(pod(1), "Normal", "Pinned", "pinned")
    while not recorder._queue.empty():
        recorder._write(recorder._queue.get())
    assert [(s.path, s.body["involvedObject"]["namespace"]) for s in posts.sent] == [
        ("/api/v1/namespaces/default/events", ""),
        ("/api/v1/namespaces/ml/events", "ml"),
    ]
