"""Section 4b: one elastic planning round (``scheduling.elastic.plan_elastic``) against cluster size.

Generated, deterministic (a seeded generator): nodes of 8 GPUs, elastic jobs of min 2 / max 6 workers
of 2 GPUs, each with 4 workers running on random nodes (so most jobs are spread and the layout has
work to do), a pool of GPUs that lets about half of them grow. The round is timed in-process, once per
case; it reports the resizes and moves the round planned (moves capped at 100 a round here).
"""

from __future__ import annotations

import random
import time
from typing import Any

from perf.common import Progress
from scheduling.cluster.state import state_of
from scheduling.elastic import ElasticJob, ElasticSettings, plan_elastic
from scheduling.model import Node, Pod, Resources
from scheduling.topology import TopologyCache


def _case(jobs: int, nodes: int, seed: int = 7) -> tuple[list[ElasticJob], list[Node], list[Pod]]:
    rng = random.Random(seed)
    cluster = [Node(f"n{i:05d}", Resources(64000, 512 * 2**30, 8)) for i in range(nodes)]
    elastic: list[ElasticJob] = []
    pods: list[Pod] = []
    for j in range(jobs):
        workers = tuple(
            Pod(
                f"u{j}-{w}",
                "perf",
                f"j{j}-worker-{w}",
                Resources(gpus=2),
                f"n{rng.randrange(nodes):05d}",
                phase="Running",
            )
            for w in range(4)
        )
        pods += workers
        elastic.append(ElasticJob(f"perf/j{j}", "q", 2, 6, Resources(gpus=2), workers, f"{j:06d}"))
    return elastic, cluster, pods


def measure_elastic(cases: tuple[tuple[int, int], ...], progress: Progress) -> list[dict[str, Any]]:
    """Time one planning round per (jobs, nodes) case."""
    rows = []
    for jobs, nodes in cases:
        elastic, cluster, pods = _case(jobs, nodes)
        snapshot = state_of(cluster, pods).snapshot()
        pool = jobs * 4 * 2 + jobs * 2  # what they hold, plus one more worker for about half of them
        start = time.perf_counter()
        plan, layout = plan_elastic(
            elastic,
            snapshot,
            pool_gpus=pool,
            deficits={"q": 0},
            now=0.0,
            last_moved={},
            settings=ElasticSettings(moves_per_round=100),
            topologies=TopologyCache(),
        )
        seconds = time.perf_counter() - start
        row = {
            "jobs": jobs,
            "nodes": nodes,
            "seconds": seconds,
            "resizes": len(plan.resizes),
            "moves": len(plan.migrations),
            "moves_to_target": sum(layout.moves.values()),
        }
        progress(f"elastic round: {jobs:,} jobs on {nodes:,} nodes in {seconds:.2f} s")
        rows.append(row)
    return rows
