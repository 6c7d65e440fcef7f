"""Where elastic jobs' workers go: the fewest nodes per job, matched to the real nodes for fewest moves.

The reference design is Voda's (docs/design/anchors.md §3.7): pack first, match second.

1. **Pack** every job's target workers onto *virtual* nodes, one per real node with the same GPUs
   available to elastic work, largest jobs first (by GPUs, then name): a job that fits one virtual node
   goes to the one it fills best (least room left); a larger one fills the roomiest first, so it spans
   as few nodes as the room allows.
2. **Match** virtual nodes to real nodes with an assignment solver (``scipy.optimize.
   linear_sum_assignment``) maximising the workers that stay where they are: the weight of putting
   virtual node v on real node n is, summed over jobs, min(workers of the job on v, workers of the job
   running on n); a virtual node may only go to a real node with the room for it. The workers that do
   not stay are the fewest moves this packing allows. Among matchings that keep as many, the workers of
   a job go to its home rack (where most of its workers run), so a job that spans nodes stays close.
   Rows and columns are in name order and the solver is deterministic, so the same cluster gives the
   same answer every time.

Workers a job keeps are its lowest replica indices (the operator removes the highest when it shrinks),
so a shrinking job's layout is planned from the workers that remain.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from scheduling.elastic.job import ElasticJob

_INFEASIBLE = -1_000_000_000
_KEPT = 1000
"""Weight of one kept worker; a worker in its job's home rack adds 1, so keeping always wins."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Target workers per job and node, and what reaching it costs.

    Attributes:
        targets: job key -> node -> workers (nodes with none are left out).
        moves: job key -> workers that must move to reach the target.
        unplaced: job key -> target workers that found no room (the pool was larger than the room).
        held_compact: the jobs that would have grown further this round by spreading, and did not,
            their model not having measured spreading free (``scheduling.elastic.growth``).
    """

    targets: Mapping[str, Mapping[str, int]]
    moves: Mapping[str, int]
    unplaced: Mapping[str, int]
    held_compact: frozenset[str] = frozenset()

    def nodes_of(self, job: str) -> int:
        """How many nodes the job spans in the target."""
        return len(self.targets.get(job, {}))


def kept_running(job: ElasticJob, size: int, nodes: Container[str]) -> dict[str, int]:
    """Running workers per node among the ``size`` lowest replica indices the job keeps.

    Only workers on ``nodes`` count: a worker still bound to a node that was deleted runs nowhere (the
    API shows it until its pod is gone), so it is neither kept in place nor moved.
    """
    counts: dict[str, int] = {}
    for pod in job.workers[:size]:
        node = pod.node_name
        if pod.holds_resources and not pod.terminating and node is not None and node in nodes:
            counts[node] = counts.get(node, 0) + 1
    return counts


def plan_layout(
    jobs: Sequence[ElasticJob],
    sizes: Mapping[str, int],
    room: Mapping[str, int],
    racks: Mapping[str, str] | None = None,
) -> Layout:
    """Pack and match (see the module docstring).

    Args:
        jobs: the elastic jobs.
        sizes: target workers per job (``scheduling.elastic.sizing.size_jobs``).
        room: per real node, the GPUs elastic workers may use: its usable GPUs less what other pods
            hold (elastic workers' own GPUs count as room); 0 for a node that takes no pod. Workers on
            a node missing here (deleted) do not count as running.
        racks: per real node, its rack (nodes missing here are in no rack).
    """
    bins, unplaced = pack_jobs(jobs, sizes, room)
    current = {job.key: kept_running(job, sizes.get(job.key, 0), room) for job in jobs}
    per_gpu = {job.key: job.worker.gpus for job in jobs}
    names = sorted(room)
    placed = match_bins(bins, names, room, current, per_gpu, racks or {})
    targets: dict[str, dict[str, int]] = {job.key: {} for job in jobs}
    for b, name in placed.items():
        for key, count in bins[b].items():
            if count:
                targets[key][name] = count
    moves = {
        key: sum(max(0, count - targets[key].get(node, 0)) for node, count in current[key].items())
        for key in targets
    }
    return Layout(
        {key: dict(sorted(t.items())) for key, t in sorted(targets.items())},
        dict(sorted(moves.items())),
        dict(sorted(unplaced.items())),
    )


def pack_jobs(
    jobs: Sequence[ElasticJob], sizes: Mapping[str, int], room: Mapping[str, int]
) -> tuple[list[dict[str, int]], dict[str, int]]:
    """Virtual nodes (one per real node, in name order, with its room): job key -> workers on each.

    Also returns the workers per job that found no room.
    """
    names = sorted(room)
    bins = [dict[str, int]() for _ in names]
    left = [room[name] for name in names]
    unplaced: dict[str, int] = {}
    order = sorted(jobs, key=lambda j: (-sizes.get(j.key, 0) * j.worker.gpus, j.key))
    for job in order:
        need, per = sizes.get(job.key, 0), job.worker.gpus
        if need and per == 0:
            if bins:
                bins[0][job.key] = need
            continue
        while need > 0:
            whole = [i for i in range(len(bins)) if left[i] >= need * per]
            if whole:
                i = min(whole, key=lambda b: (left[b] - need * per, b))
                take = need
            else:
                i = max(range(len(bins)), key=lambda b: (left[b], -b), default=-1)
                take = left[i] // per if i >= 0 else 0
                if take == 0:
                    unplaced[job.key] = need
                    break
            bins[i][job.key] = bins[i].get(job.key, 0) + take
            left[i] -= take * per
            need -= take
    return bins, unplaced


def match_bins(
    bins: Sequence[Mapping[str, int]],
    names: Sequence[str],
    room: Mapping[str, int],
    current: Mapping[str, Mapping[str, int]],
    per_gpu: Mapping[str, int],
    racks: Mapping[str, str] | None = None,
) -> dict[int, str]:
    """Virtual node index -> real node, keeping the most running workers where they are.

    Only virtual nodes that hold workers are matched (an empty one fits anywhere and keeps nothing),
    so the matrix is (virtual nodes in use) x (real nodes), not nodes x nodes.
    """
    used_bins = [b for b, packed in enumerate(bins) if any(packed.values())]
    if not used_bins or not names:
        return {}
    racks = racks or {}
    column = {name: n for n, name in enumerate(names)}
    in_rack: dict[str, np.ndarray] = {}
    for n, name in enumerate(names):
        if name in racks:
            in_rack.setdefault(racks[name], np.zeros(len(names), dtype=bool))[n] = True
    weight = np.zeros((len(used_bins), len(names)), dtype=np.int64)
    used = np.zeros(len(used_bins), dtype=np.int64)
    for row, b in enumerate(used_bins):
        for key, count in bins[b].items():
            used[row] += count * per_gpu[key]
            for name, running in current[key].items():  # a job runs on few nodes: sparse
                weight[row, column[name]] += _KEPT * min(count, running)
            home = _home_rack(current[key], racks)
            if home is not None:
                weight[row, in_rack[home]] += count
    capacity = np.array([room[name] for name in names], dtype=np.int64)
    weight[used[:, None] > capacity[None, :]] = _INFEASIBLE
    rows, cols = linear_sum_assignment(weight, maximize=True)
    return {used_bins[int(r)]: names[int(n)] for r, n in zip(rows, cols, strict=True)}


def _home_rack(running: Mapping[str, int], racks: Mapping[str, str]) -> str | None:
    """The rack where most of a job's running workers are (ties by rack name), if any."""
    counts: dict[str, int] = {}
    for node, count in running.items():
        if node in racks:
            counts[racks[node]] = counts.get(racks[node], 0) + count
    return min(counts, key=lambda rack: (-counts[rack], rack)) if counts else None
