"""The Pollux speed model: measured step times, the artifact's batch split, and epochs of work."""

from __future__ import annotations

import pytest

from simulator.speed import PolluxSpeed, Progress, SpeedError, canonical
from simulator.traces import TraceJob


@pytest.fixture(scope="module")
def speed() -> PolluxSpeed:
    return PolluxSpeed.load()


@pytest.mark.parametrize(
    ("placement", "key"),
    [((4, 2), (2, 4)), ((3, 1, 2), (1, 2, 3)), ((2, 0, 4), (2, 4)), ((1,), (1,)), ((4, 4, 1), (1, 4, 4))],
)
def test_placement_keyed_by_smallest_rotation(placement: tuple[int, ...], key: tuple[int, ...]) -> None:
    assert canonical(placement) == key


def test_empty_placement_has_no_speed() -> None:
    with pytest.raises(SpeedError):
        canonical(())


def test_measured_placement_reads_the_row_and_interpolates_between_rows(speed: PolluxSpeed) -> None:
    cifar = speed.profile("cifar10")
    # cifar10/placements.csv: "1,32,0.0427886962890625,..." and "1,45,0.05048525333404541,..."
    assert cifar.step_time((1,), 32)[0] == 0.0427886962890625
    step_38, _ = cifar.step_time((1,), 38)
    assert step_38 == pytest.approx(0.0427886962890625 + (0.05048525333404541 - 0.0427886962890625) * 6 / 13)
    # (4, 2) is measured as its rotation "24".
    assert cifar.step_time((4, 2), 32) == (0.1585538864135742, 0.11687971038818361)


def test_unmeasured_placement_interpolates_through_the_scaling_runs(speed: PolluxSpeed) -> None:
    # Six single-GPU nodes were not measured as a placement; scalability.csv has "6,6,32,0.1409...,0.0994...".
    step, sync = speed.profile("cifar10").step_time((1, 1, 1, 1, 1, 1), 32)
    assert step == pytest.approx(0.14090566635131835)
    assert sync == pytest.approx(0.09941204528808593)


@pytest.mark.parametrize(
    ("application", "replicas", "batch", "atomic", "steps"),
    [
        ("cifar10", 6, 2048, 342, 0),  # ceil(2048 / 6)
        ("ncf", 1, 32768, 16384, 1),  # one GPU above the smallest batch: at least one accumulation step
        ("cifar10", 1, 128, 128, 0),  # one GPU at the smallest batch: no accumulation
        ("yolov3", 2, 64, 8, 3),  # 32 per GPU, at most 8 measured per GPU: 4 passes of 8
    ],
)
def test_fixed_batch_is_split_as_the_artifact_splits_it(
    speed: PolluxSpeed, application: str, replicas: int, batch: int, atomic: int, steps: int
) -> None:
    split = speed.profile(application).split(replicas, batch)
    assert (split.atomic, split.accumulation_steps) == (atomic, steps)


def test_work_is_the_least_progress_any_validation_run_needed(speed: PolluxSpeed) -> None:
    bert = speed.profile("bert")
    # bert trains 2 epochs; of its six runs, validation-12.csv ends epoch 2 at the least progress, 14774.
    assert bert.epochs == 2
    assert bert.total_work == 14774.0
    assert bert.progress_at(0) == 0.0


def test_advance_within_an_epoch_is_goodput_times_seconds(speed: PolluxSpeed) -> None:
    job = TraceJob("c", 0, "cifar10", 1, 128)
    cifar = speed.profile("cifar10")
    step, _ = cifar.step_time((1,), 128)
    # At the smallest batch the statistical gain is exactly 1: one progress unit per step.
    moved = speed.advance(job, Progress(), (1,), 10)
    assert moved.finished_after is None
    assert moved.progress.epoch == 0
    assert moved.progress.work == pytest.approx(10 / step)


def test_job_from_workload_1_alone_takes_its_published_training_time(speed: PolluxSpeed) -> None:
    # cifar10-0 of workload-1 ran on (4, 2) in the artifact's Tiresias run with JCT 953 s:
    # 13 s to the decision at 120 s, 30 s restart, 910 s of training.
    job = TraceJob("cifar10-0", 107, "cifar10", 6, 2048)
    done = speed.advance(job, Progress(), (4, 2), 10_000)
    assert done.finished_after == 910
    assert done.progress.epoch == 100
    assert speed.remaining_work(job, done.progress) == 0.0


def test_unknown_application_and_batch_are_refused_before_a_run(speed: PolluxSpeed) -> None:
    with pytest.raises(SpeedError, match="unknown application 'gpt'"):
        speed.check(TraceJob("x", 0, "gpt", 1, 8))
    with pytest.raises(SpeedError, match=r"cifar10: batch 99999 outside the validated batches"):
        speed.check(TraceJob("x", 0, "cifar10", 1, 99999))
