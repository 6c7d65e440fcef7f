"""Readers for the two trace formats the simulator replays: Pollux workloads and Philly job logs.

A bad row stops the run with an error naming the file, the line and the field, because a simulator that
skips or guesses a row reports figures for a workload nobody wrote down (``shared/traces/README.md``
describes both formats).
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

POLLUX_COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")


class WorkloadError(ValueError):
    """A trace file that cannot be read as written, with the place of the first problem."""

    def __init__(self, path: Path, line: int, field: str, problem: str) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(f"{path}:{line}: field {field!r}: {problem}")


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a Pollux evaluation workload (``simulator/workloads/workload-N.csv`` in the artifact).

    Non-adaptive policies (Tiresias) run the job with exactly ``num_replicas`` GPUs and a fixed total
    ``batch_size``; the application names the measured profile its speed comes from.

    ``queue`` is the team it belongs to (Pollux workloads have one; a Philly job's virtual cluster), and
    ``duration`` the run time a rigid trace records at ``num_replicas`` GPUs (0 for a profiled job).
    """

    name: str
    time: int
    application: str
    num_replicas: int
    batch_size: int
    queue: str = "default"
    duration: int = 0


@dataclass(frozen=True, slots=True)
class PhillyJob:
    """One job of the Philly log as the Pollux authors flattened it (``philly_jobs_pollux.csv``)."""

    timestamp: dt.datetime
    duration: int
    num_gpus: int
    gpu_time: int
    cluster: str


def read_pollux_workload(path: Path) -> tuple[TraceJob, ...]:
    """Read a Pollux workload in file order (the artifact schedules ties in that order).

    Raises:
        WorkloadError: a missing column, a malformed or negative number, an empty name or a repeated one.
    """
    jobs = tuple(_read(path, POLLUX_COLUMNS, _pollux_row))
    seen: dict[str, int] = {}
    for line, job in enumerate(jobs, start=2):
        if job.name in seen:
            raise WorkloadError(path, line, "name", f"{job.name!r} repeats line {seen[job.name]}")
        seen[job.name] = line
    return jobs


def read_philly_jobs(path: Path) -> tuple[PhillyJob, ...]:
    """Read the Philly job log in file order.

    Raises:
        WorkloadError: a missing column, a malformed timestamp or number, or a negative number.
    """
    return tuple(_read(path, PHILLY_COLUMNS, _philly_row))


def _pollux_row(row: _Row) -> TraceJob:
    return TraceJob(
        name=row.text("name"),
        time=row.integer("time", minimum=0),
        application=row.text("application"),
        num_replicas=row.integer("num_replicas", minimum=1),
        batch_size=row.integer("batch_size", minimum=1),
    )


def _philly_row(row: _Row) -> PhillyJob:
    return PhillyJob(
        timestamp=row.timestamp("timestamp"),
        duration=row.integer("duration", minimum=0),
        num_gpus=row.integer("num_gpus", minimum=1),
        gpu_time=row.integer("gpu_time", minimum=0),
        cluster=row.text("cluster"),
    )


@dataclass(frozen=True, slots=True)
class _Row:
    """One data row with the place it came from, so every field error can say where it is."""

    path: Path
    line: int
    values: dict[str, str]

    def _fail(self, field: str, problem: str) -> WorkloadError:
        return WorkloadError(self.path, self.line, field, problem)

    def text(self, field: str) -> str:
        value = self.values[field].strip()
        if not value:
            raise self._fail(field, "is empty")
        return value

    def integer(self, field: str, *, minimum: int) -> int:
        raw = self.text(field)
        try:
            value = int(raw)
        except ValueError:
            # The Philly log writes some integers as floats ("3600.0"); accept those, refuse "1.5".
            try:
                number = float(raw)
            except ValueError:
                raise self._fail(field, f"{raw!r} is not a number") from None
            if not number.is_integer():
                raise self._fail(field, f"{raw!r} is not a whole number") from None
            value = int(number)
        if value < minimum:
            raise self._fail(field, f"{value} is below {minimum}")
        return value

    def timestamp(self, field: str) -> dt.datetime:
        raw = self.text(field)
        try:
            return dt.datetime.fromisoformat(raw)
        except ValueError:
            raise self._fail(field, f"{raw!r} is not a timestamp (YYYY-MM-DD HH:MM:SS)") from None


def _read(path: Path, columns: Sequence[str], parse: Callable[[_Row], T]) -> Iterator[T]:
    try:
        yield from _rows(path, columns, parse)
    except UnicodeDecodeError as exc:
        raise WorkloadError(
            path, 0, columns[0], f"not UTF-8 text (byte {exc.start}): not a CSV trace"
        ) from None
    except csv.Error as exc:
        raise WorkloadError(path, 0, columns[0], f"not a CSV trace: {exc}") from None


def _rows(path: Path, columns: Sequence[str], parse: Callable[[_Row], T]) -> Iterator[T]:
    with path.open(newline="", encoding="utf-8") as stream:
        reader = csv.reader(stream)
        header = [name.strip() for name in next(reader, [])]
        for column in columns:
            if column not in header:
                raise WorkloadError(path, 1, column, f"column missing from header {header}")
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(header):
                raise WorkloadError(
                    path,
                    reader.line_num,
                    columns[0],
                    f"row has {len(fields)} fields, the header {len(header)}",
                )
            values = dict(zip(header, fields, strict=True))
            yield parse(_Row(path, reader.line_num, {column: values[column] for column in columns}))
