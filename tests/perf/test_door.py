"""The door's cost section: the worker decides on a real cache, and the table reads its figures."""

from __future__ import annotations

from perf.door import render_door, worker


def test_the_worker_lets_the_probe_in_at_every_count_in_flight_and_times_each() -> None:
    report = worker(12, [0, 40], calls=2)  # 40 in flight: every GPU of five nodes is planned
    assert report["nodes"] == 12
    assert set(report["in_flight"]) == set(report["as_created"]) == {"0", "40"}
    for figures in [*report["in_flight"].values(), *report["as_created"].values()]:
        assert 0 < figures["p50_ms"] <= figures["p99_ms"]


def test_the_table_prints_each_count_and_its_ratio_to_none_in_flight() -> None:
    results = {
        "door": {
            "nodes": 1000,
            "in_flight": {"0": {"p50_ms": 0.5, "p99_ms": 0.6}, "1000": {"p50_ms": 10.0, "p99_ms": 30.0}},
            "as_created": {"1000": {"p50_ms": 12.0, "p99_ms": 40.0}},
        }
    }
    lines = render_door(results)
    assert "1,000 nodes" in lines[0]
    assert lines[-2].split() == ["0", "0.50", "0.60", "1.0x", "-", "-"]
    assert lines[-1].split() == ["1000", "10.00", "30.00", "20.0x", "12.00", "40.00"]
    assert render_door({"door": {"error": "boom"}}) == ["\nDoor decision in sidecar mode: boom"]
    assert render_door({}) == []
