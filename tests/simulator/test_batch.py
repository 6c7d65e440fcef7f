"""What a job does with its batch on other GPUs than it asked for: fixed, scaled, tuned."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from simulator.__main__ import main
from simulator.batch import JobBatch, scaled_total, tuned_grid
from simulator.comparison import Comparison
from simulator.speed import PolluxSpeed, Progress
from simulator.traces import TraceJob

CIFAR = TraceJob("cifar10-0", 107, "cifar10", 6, 2048)
"""Workload 1's first job: 2048 over 6 GPUs, about 341 per worker."""


@pytest.fixture(scope="module")
def speeds() -> dict[JobBatch, PolluxSpeed]:
    return {batch: PolluxSpeed.load(batch=batch) for batch in JobBatch}


@pytest.mark.parametrize(
    ("job", "replicas", "total"),
    [
        (CIFAR, 6, 2048),  # the GPUs it asked for: the row's batch, exactly
        (CIFAR, 1, 341),  # one worker: its per-worker batch, 2048 / 6 rounded
        (CIFAR, 3, 1024),
        (TraceJob("b", 0, "bert", 4, 16), 1, 12),  # 4 per worker: below the smallest validated batch, 12
        (TraceJob("c", 0, "cifar10", 2, 4096), 4, 4096),  # 8192 would pass the largest validated, 4096
    ],
)
def test_scaled_keeps_the_per_worker_batch_within_the_validated_batches(
    speeds: dict[JobBatch, PolluxSpeed], job: TraceJob, replicas: int, total: int
) -> None:
    app = speeds[JobBatch.SCALED].profile(job.application)
    assert scaled_total(job, replicas, app.init_batch_size, app.max_batch_size) == total


@pytest.mark.parametrize("placement", [(4, 2), (2, 4)])
def test_a_job_on_the_gpus_it_asked_for_trains_alike_fixed_or_scaled(
    speeds: dict[JobBatch, PolluxSpeed], placement: tuple[int, ...]
) -> None:
    """Rigid policies always run a job on its asked GPUs: their figures cannot depend on this choice."""
    fixed = speeds[JobBatch.FIXED].advance(CIFAR, Progress(), placement, 10_000)
    scaled = speeds[JobBatch.SCALED].advance(CIFAR, Progress(), placement, 10_000)
    assert scaled == fixed
    assert fixed.finished_after == 910  # the artifact's Tiresias run of this job (test_speed)


def test_a_scaled_job_on_half_its_gpus_trains_its_per_worker_batch_on_each(
    speeds: dict[JobBatch, PolluxSpeed],
) -> None:
    job = TraceJob("c", 0, "cifar10", 4, 2048)  # 512 per worker
    cifar = speeds[JobBatch.SCALED].profile("cifar10")
    step, _ = cifar.step_time((2,), 512)
    scaled = speeds[JobBatch.SCALED].advance(job, Progress(), (2,), 60)
    assert scaled.samples_per_second == pytest.approx(1024 / step)
    # Fixed, the two GPUs run the whole 2048 in accumulation steps: more samples a second, but less
    # progress, since a smaller batch gains more per sample.
    fixed = speeds[JobBatch.FIXED].advance(job, Progress(), (2,), 60)
    assert fixed.progress.work < scaled.progress.work


@pytest.mark.parametrize("placement", [(1,), (2,), (4,), (4, 2), (4, 4, 4)])
def test_a_tuned_job_makes_at_least_the_progress_of_any_batch_on_its_grid(
    speeds: dict[JobBatch, PolluxSpeed], placement: tuple[int, ...]
) -> None:
    """Within an epoch, tuned progress is the best goodput over the grid it searches, times the seconds."""
    tuned = speeds[JobBatch.TUNED].advance(CIFAR, Progress(), placement, 5)
    cifar = speeds[JobBatch.TUNED].profile("cifar10")
    replicas = sum(placement)
    for atomic in tuned_grid(cifar.min_local_batch, cifar.max_local_batch):
        total = replicas * atomic
        if not cifar.init_batch_size <= total <= cifar.max_batch_size:
            continue
        step, _ = cifar.step_time(placement, atomic)
        sqr, var = cifar.grad_stats(total, 0)
        goodput = (var + sqr) / (var / (total / cifar.init_batch_size) + sqr) / step
        assert tuned.progress.work >= goodput * 5 * (1 - 1e-9), atomic
    fixed = speeds[JobBatch.FIXED].advance(CIFAR, Progress(), placement, 5)
    assert tuned.progress.work > fixed.progress.work


def test_tuned_grid_is_geometric_and_bounded() -> None:
    grid = tuned_grid(32, 1024)
    assert grid[0] == 32 and grid[-1] == 1024
    assert list(grid) == sorted(set(grid))
    assert tuned_grid(8, 8) == (8,)


def test_run_says_and_records_what_the_jobs_did_with_their_batch(tmp_path: Path) -> None:
    path = tmp_path / "workload-9.csv"
    path.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,6,2048\n")
    args = ["run", "--workload", str(path), "--policy", "phalanx,tiresias"]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0, text.output
    assert "seed 0, jobs' batch scaled" in text.output
    encoded = CliRunner().invoke(main, [*args, "--batch", "tuned", "--json", "-"])
    assert msgspec.json.decode(encoded.output, type=Comparison).batch == "tuned"
    refused = CliRunner().invoke(main, [*args, "--batch", "adaptive"])
    assert refused.exit_code == 2
    assert "'adaptive' is not one of 'fixed', 'scaled', 'tuned'" in refused.output
