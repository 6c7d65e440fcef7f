"""The throughput report a job writes and the samples phalanx keeps: hostile text is refused, not trusted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeio.mpijobs import mpijob_from_api
from kubeio.progress import (
    MAX_SAMPLES,
    SAMPLES_ANNOTATION,
    THROUGHPUT_ANNOTATION,
    ReportError,
    parse_report,
    parse_samples,
    record,
    render_samples,
)
from scheduling.elastic.throughput import Sample


@pytest.mark.parametrize(
    ("text", "said"),
    [
        pytest.param("fast!", "must be JSON", id="not-json"),
        pytest.param("[1, 2]", "must be JSON", id="not-an-object"),
        pytest.param('{"workers": 4}', "samplesPerSecond must be a positive number, got None", id="no-rate"),
        pytest.param('{"samplesPerSecond": -3, "workers": 4}', "got -3", id="negative"),
        pytest.param('{"samplesPerSecond": NaN, "workers": 4}', "got nan", id="nan"),
        pytest.param('{"samplesPerSecond": true, "workers": 4}', "got True", id="bool"),
        pytest.param(
            '{"samplesPerSecond": 5, "workers": 2.5}', "workers must be a positive whole number", id="half"
        ),
        pytest.param("[" * 100_000, "must be JSON", id="deep"),
    ],
)
def test_a_report_that_is_no_report_is_refused_with_a_reason(text: str, said: str) -> None:
    with pytest.raises(ReportError, match=said):
        parse_report(text)


def test_no_report_is_none() -> None:
    assert parse_report(None) is None


@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 8), st.floats(0.01, 1e6)), max_size=80))
def test_samples_round_trip_through_their_annotation(raw: list[tuple[int, int, float]]) -> None:
    samples: tuple[Sample, ...] = ()
    for k, n, x in raw:
        samples = record(samples, Sample(k, n, x))
    assert len(samples) <= MAX_SAMPLES
    assert len({(s.workers, s.nodes) for s in samples}) == len(samples), "one per size and spread"
    assert parse_samples(render_samples(samples)) == samples


@pytest.mark.parametrize("text", ["", "{}", "[[1,1]]", '[[0,1,5.0],[1,1,"x"],[true,1,2.0]]', "[" * 10_000])
def test_samples_that_are_no_samples_are_dropped(text: str) -> None:
    assert parse_samples(text) == ()


def test_an_mpijob_carries_its_report_and_samples() -> None:
    raw = {
        "metadata": {
            "namespace": "ml",
            "name": "j",
            "uid": "u",
            "annotations": {
                THROUGHPUT_ANNOTATION: '{"samplesPerSecond": 9.5, "workers": 2}',
                SAMPLES_ANNOTATION: "[[1,1,5.0]]",
            },
        },
        "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 2}}},
    }
    job = mpijob_from_api(raw)
    assert parse_report(job.throughput) == (2, 9.5)
    assert parse_samples(job.samples) == (Sample(1, 1, 5.0),)
