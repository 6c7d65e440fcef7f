"""The trace readers: both formats read as written, every bad row named by file, line and field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from simulator.traces import (
    PhillyJob,
    TraceJob,
    WorkloadError,
    read_philly_jobs,
    read_pollux_workload,
)

POLLUX_HEADER = "name,time,application,num_replicas,batch_size\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return path


def test_pollux_rows_read_in_file_order(tmp_path: Path) -> None:
    path = _write(tmp_path, POLLUX_HEADER + "b-0,107,cifar10,6,2048\na-1,5,ncf,1,32768\n")
    assert read_pollux_workload(path) == (
        TraceJob("b-0", 107, "cifar10", 6, 2048),
        TraceJob("a-1", 5, "ncf", 1, 32768),
    )


def test_pollux_shared_workload_has_160_jobs(shared_dir: Path) -> None:
    jobs = read_pollux_workload(shared_dir / "traces/pollux_workloads/workload-1.csv")
    assert len(jobs) == 160
    assert jobs[0] == TraceJob("cifar10-0", 107, "cifar10", 6, 2048)


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ("a,1x,ncf,1,32768", "time", "'1x' is not a number"),
        ("a,-1,ncf,1,32768", "time", "-1 is below 0"),
        ("a,1,ncf,0,32768", "num_replicas", "0 is below 1"),
        ("a,1,ncf,1,1.5", "batch_size", "'1.5' is not a whole number"),
        ("a,1,,1,32768", "application", "is empty"),
        ("a,1,ncf,1", "name", "row has 4 fields, the header 5"),
    ],
)
def test_pollux_bad_row_names_file_line_and_field(tmp_path: Path, row: str, field: str, problem: str) -> None:
    path = _write(tmp_path, POLLUX_HEADER + "ok,0,ncf,1,32768\n" + row + "\n")
    with pytest.raises(WorkloadError) as caught:
        read_pollux_workload(path)
    assert (caught.value.path, caught.value.line, caught.value.field) == (path, 3, field)
    assert str(caught.value) == f"{path}:3: field {field!r}: {problem}"


def test_pollux_repeated_name_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, POLLUX_HEADER + "a,0,ncf,1,32768\na,5,ncf,1,32768\n")
    with pytest.raises(WorkloadError, match=r":3: field 'name': 'a' repeats line 2"):
        read_pollux_workload(path)


def test_missing_column_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "name,time,application,num_replicas\na,0,ncf,1\n")
    with pytest.raises(WorkloadError, match=r":1: field 'batch_size': column missing"):
        read_pollux_workload(path)


def test_philly_rows_accept_whole_floats(tmp_path: Path) -> None:
    path = _write(tmp_path, PHILLY_HEADER + "2017-10-09 07:01:55,66.0,2,132.0,11cb48\n")
    assert read_philly_jobs(path) == (PhillyJob(dt.datetime(2017, 10, 9, 7, 1, 55), 66, 2, 132, "11cb48"),)


def test_philly_bad_timestamp_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, PHILLY_HEADER + "2017-10-09 07:01:55,66.0,1,66.0,x\nyesterday,1,1,1,x\n")
    with pytest.raises(WorkloadError, match=r":3: field 'timestamp': 'yesterday' is not a timestamp"):
        read_philly_jobs(path)


def test_philly_shared_log_reads_whole(shared_dir: Path) -> None:
    jobs = read_philly_jobs(shared_dir / "traces/philly/philly_jobs_pollux.csv")
    assert len(jobs) == 82_247
    assert sum(1 for job in jobs if job.num_gpus == 128) == 3
