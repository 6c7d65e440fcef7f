"""The simulated training model: speed from GPUs and nodes, exact integration, launchers finishing."""

from __future__ import annotations

import pytest

from kubeio.progress import parse_report
from testbed.training import (
    REPORT_SETTLE_SECONDS,
    SPAN_EFFICIENCY,
    JobPod,
    Training,
    TrainingBook,
    parse_scaling,
    parse_work,
    speed,
)


def test_speed_counts_gpus_and_charges_each_extra_node() -> None:
    assert speed({}) == 0.0
    assert speed({"n1": 8}) == 8.0
    assert speed({"n1": 4, "n2": 4}) == pytest.approx(8 * SPAN_EFFICIENCY)
    assert speed({"n1": 2, "n2": 2, "n3": 2, "n4": 2}) == pytest.approx(8 * SPAN_EFFICIENCY**3)
    assert speed({"n1": 8, "n2": 0}) == 8.0, "a node holding only a GPU-less pod is not spanned"


@pytest.mark.parametrize(
    ("text", "work"),
    [
        ("100", 100.0),
        ("2.5", 2.5),
        ("0", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("lots", None),
        (None, None),
    ],
)
def test_parse_work(text: str | None, work: float | None) -> None:
    assert parse_work(text) == work


def _worker(node: str, gpus: int = 2, job: str = "llama") -> JobPod:
    return JobPod("ml", job, node, gpus)


def test_work_advances_only_while_workers_run_and_the_launcher_finishes_exactly_on_time() -> None:
    book = TrainingBook()
    book.pod_running("launcher", JobPod("ml", "llama", "n1", 0), now=0.0)
    training = book.launcher_started("launcher", Training("ml", "llama", "llama-launcher", 80.0), now=0.0)
    assert training.speed == 0.0 and book.next_finish(5.0) is None
    book.pod_running("w0", _worker("n1"), now=10.0)
    book.pod_running("w1", _worker("n1"), now=10.0)  # 4 GPUs on one node from t=10
    assert training.speed == 4.0
    assert book.take_finished(20.0) == [] and training.done == pytest.approx(40.0)
    book.pod_running("w2", _worker("n2"), now=20.0)  # 6 GPUs on 2 nodes: 5.4 GPU-s/s
    assert (training.gpus, training.nodes) == (6, 2)
    eta = book.next_finish(20.0)
    assert eta == pytest.approx(20.0 + 40.0 / (6 * SPAN_EFFICIENCY))
    assert eta is not None and book.take_finished(eta - 0.01) == []
    assert book.take_finished(eta) == [("launcher", training)]
    assert book.trainings() == [] and book.next_finish(eta) is None


def test_a_worker_that_stops_slows_its_job_and_only_its_job() -> None:
    book = TrainingBook()
    a = book.launcher_started("la", Training("ml", "a", "a-launcher", 1000.0), now=0.0)
    b = book.launcher_started("lb", Training("ml", "b", "b-launcher", 1000.0), now=0.0)
    book.pod_running("a0", _worker("n1", job="a"), now=0.0)
    book.pod_running("a1", _worker("n2", job="a"), now=0.0)
    book.pod_running("b0", _worker("n3", job="b"), now=0.0)
    changed = book.pod_gone("a1", now=10.0)
    assert changed == [a]
    assert a.done == pytest.approx(10 * 4 * SPAN_EFFICIENCY) and a.speed == 2.0
    book.advance(20.0)
    assert a.done == pytest.approx(10 * 4 * SPAN_EFFICIENCY + 20.0)
    assert b.done == pytest.approx(40.0)
    assert book.pod_gone("unknown", now=30.0) == []


def test_a_gone_launcher_ends_its_training_and_the_description_says_where_it_stands() -> None:
    book = TrainingBook()
    book.pod_running("w0", _worker("n1", gpus=8), now=0.0)
    training = book.launcher_started("launcher", Training("ml", "llama", "llama-launcher", 100.0), now=0.0)
    book.advance(5.0)
    assert training.describe() == (
        "mpijob ml/llama: 8 GPUs on 1 node(s), speed 8.00 GPU-s/s, 40.0 of 100 GPU-s done (40%)"
    )
    book.pod_gone("launcher", now=6.0)
    assert book.trainings() == [] and book.take_finished(100.0) == []


def test_a_job_that_scales_poorly_gains_little_from_more_gpus() -> None:
    assert speed({"n1": 8}, scaling=0.5) == pytest.approx(8**0.5)
    assert speed({"n1": 4, "n2": 4}, scaling=1.0) == speed({"n1": 4, "n2": 4})


@pytest.mark.parametrize(
    ("text", "scaling"), [("0.3", 0.3), ("1", 1.0), ("0", 1.0), ("1.5", 1.0), ("x", 1.0), (None, 1.0)]
)
def test_parse_scaling(text: str | None, scaling: float) -> None:
    assert parse_scaling(text) == scaling


def test_a_training_reports_its_throughput_with_the_workers_running() -> None:
    book = TrainingBook()
    training = Training("ml", "llama", "llama-launcher", 1e9, scaling=0.5)
    book.launcher_started("launcher", training, 0.0)
    assert training.report() is None, "no worker runs: nothing to report"
    book.pod_running("launcher-pod", JobPod("ml", "llama", "n1", 0, worker=False), 0.0)
    for i in range(4):
        book.pod_running(f"w{i}", _worker("n1"), 1.0)
    reported = parse_report(training.report())
    assert reported is not None
    assert reported[0] == 4
    assert reported[1] == pytest.approx(100 * 8**0.5, abs=1e-3)


def test_a_job_growing_worker_by_worker_is_reported_once_at_the_size_it_reached() -> None:
    """One report per worker starting kept the job's MPI Operator from syncing for 20 s and more.

    Each write wakes the operator, which delays each wake-up of a job exponentially until a sync succeeds.
    """
    book = TrainingBook()
    training = Training("ml", "llama", "llama-launcher", 1e9)
    book.launcher_started("launcher", training, 0.0)
    book.pod_running("launcher-pod", JobPod("ml", "llama", "n1", 0, worker=False), 0.0)
    for i in range(4):
        book.pod_running(f"w{i}", _worker("n1"), 0.25 * i)
    assert book.settled(0.75 + REPORT_SETTLE_SECONDS - 0.01) == [], "still changing: nothing to report"
    assert book.next_settled() == 0.75 + REPORT_SETTLE_SECONDS
    assert book.settled(0.75 + REPORT_SETTLE_SECONDS) == [training]
    assert parse_report(training.report()) == (4, 800.0)
    assert book.settled(100.0) == [] and book.next_settled() is None, "one report per change"
    book.pod_gone("w3", 100.0)
    assert book.settled(100.0 + REPORT_SETTLE_SECONDS) == [training], "the next change is reported again"
