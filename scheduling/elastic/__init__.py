"""Elastic MPI jobs: how many workers each runs and on which nodes (docs/design/elastic-mpi.md §3).

``job`` says what an elastic job is and checks its declaration; ``sizing`` divides GPUs among elastic
jobs between their minimum and maximum by their queues' fair share; ``layout`` packs each job's
workers onto the fewest nodes and matches that packing to the real nodes with an assignment solver,
so that the fewest workers move; ``planner`` turns sizes and layouts into one ``Plan`` (resizes and
moves) under the guards: never below a job's minimum, moves rate-limited, and a move only when it
saves a node.
"""

from scheduling.elastic.elastic_planner import plan_elastic
from scheduling.elastic.job import (
    MAX_ELASTIC_WORKERS,
    ElasticJob,
    ElasticSettings,
    JobError,
    WorkerRange,
    check_job,
)
from scheduling.elastic.layout import Layout, plan_layout
from scheduling.elastic.sizing import size_jobs

__all__ = [
    "MAX_ELASTIC_WORKERS",
    "ElasticJob",
    "ElasticSettings",
    "JobError",
    "Layout",
    "WorkerRange",
    "check_job",
    "plan_elastic",
    "plan_layout",
    "size_jobs",
]
