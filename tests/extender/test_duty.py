"""The extender acts on its own only while its kube-scheduler calls it (a standby's never does).

The duty itself over a fake clock; the real app notes verb calls, not probes; the recovery loop skips
its passes off duty. The two-pair failover is proven end to end in ``tests/e2e/test_scheduler_ha.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import orjson
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.duty import Duty
from extender.extender_settings import ExtenderSettings
from extender.service import Extender
from tests.builders import FakeBinder, FakeClock
from tests.extender.appkit import fixture_cluster


def test_the_first_call_after_a_quiet_window_recovers_first_and_later_calls_do_not() -> None:
    clock, recoveries = FakeClock(100.0), []
    duty = Duty(clock=clock, window=10.0, on_duty=lambda: recoveries.append(clock.now))
    assert not duty.on(), "never called: beside a standby"
    duty.called()
    assert duty.on() and recoveries == [100.0]
    for now in (105.0, 114.0, 123.0):  # called every few seconds: stays on duty
        clock.now = now
        duty.called()
    assert recoveries == [100.0]
    clock.now = 133.5  # quiet for 10.5 s
    assert not duty.on(), "off duty: its recovery loop stands still"
    duty.called()
    assert recoveries == [100.0, 133.5]


def test_concurrent_first_calls_recover_once_and_all_wait_for_it() -> None:
    started, release, runs = threading.Event(), threading.Event(), []

    def slow_recovery() -> None:
        runs.append(1)
        started.set()
        release.wait(5)

    duty = Duty(clock=time.monotonic, window=10.0, on_duty=slow_recovery)
    answered: list[int] = []

    def call(i: int) -> None:
        duty.called()
        answered.append(i)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    assert started.wait(5)
    time.sleep(0.1)
    assert answered == [], "no call is answered before the recovery ends"
    release.set()
    for thread in threads:
        thread.join(5)
    assert runs == [1] and sorted(answered) == [0, 1, 2, 3]


def test_a_failed_recovery_does_not_fail_the_call() -> None:
    def broken() -> None:
        msg = "API server down"
        raise RuntimeError(msg)

    duty = Duty(clock=FakeClock(100.0), window=10.0, on_duty=broken)
    duty.called()
    assert duty.on()


def test_the_app_notes_verb_calls_but_not_probes_or_scrapes(shared_dir: Path) -> None:
    cluster = fixture_cluster(shared_dir)
    service = Extender(cluster, FakeBinder(cluster), clock=lambda: 0.0, promise_ttl=60.0)
    calls: list[str] = []
    duty = Duty(clock=time.monotonic, window=60.0, on_duty=lambda: calls.append("recovered"))
    app = create_app(ExtenderSettings(), service, registry=CollectorRegistry(), ready=lambda: True, duty=duty)
    client = app.test_client()
    for path in ("/readyz", "/healthz", "/metrics"):
        client.get(path)
    assert not duty.on() and calls == []
    request = (shared_dir / "fixtures" / "extender" / "nodecache-false" / "filter.request.json").read_bytes()
    reply = client.post("/filter", data=request, content_type="application/json")
    assert reply.status_code == 200, reply.data
    assert duty.on() and calls == ["recovered"]
    assert orjson.loads(reply.data).get("Error") in (None, ""), "a real filter answer"
