"""The search behind ``best_gpu_set``: exact on the machines that exist, bounded in time above them.

Every request gets an answer in bounded time, whatever the node's GPU count (scoring every subset
fails outright above 20 GPUs and costs seconds at 20, on kube-scheduler's serial path).

**Exact** when the free GPUs hold at most :data:`EXACT_SETS` k-subsets, which covers every request on
nodes of up to 16 GPUs (C(16, 8) is the most) and small requests on bigger ones. All k-subsets are ranked
at once with array arithmetic by a key that is a lower bound of their exact key (the cut upper bound of
:class:`~scheduling.topology.node.NodeTopology` in place of the bandwidth, then the tie-breaks of
:mod:`~scheduling.topology.scoring`, which are exact), and then evaluated exactly in that order until the
next ranked key cannot beat the best exact key found: the result is the one scoring every subset gives.
The bounds are tight on the machines that exist (one exact evaluation is the rule); as a last guard on
time, the walk stops after :data:`MAX_EXACT_EVALUATIONS` exact evaluations with the best set seen.

**Bounded** above that. The family searched is the k lowest free indices plus, from every free GPU, the
set grown greedily from it: each step adds the GPU whose weakest pair bandwidth to the set so far is the
largest (then the largest total pair bandwidth, then the lowest index). The family is ranked by the
weakest pair bandwidth inside each set (a lower bound of its bandwidth: a set only adds paths to a pair),
then by the same tie-breaks, and only the winner's bandwidth is computed exactly. Cost: O(n²k) array
steps and one exact evaluation, for n free GPUs. Guarantee: the chosen set's weakest pair is at least that
of the k lowest free indices; and when the node's pair bandwidths are hierarchical (ultrametric: of any
three pairs of three GPUs, the two smallest are equal, as on PCIe trees, NVSwitch and uniform nodes) it is
the largest weakest pair any k free GPUs have, so the set sits in the best-connected island that fits it.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, combinations
from math import comb

import numpy as np
import numpy.typing as npt

from scheduling.topology.node import NodeTopology

EXACT_SETS = comb(16, 8)
"""The most k-subsets ranked exactly (12,870: every request on a 16-GPU node)."""

MAX_EXACT_EVALUATIONS = 256
"""The most sets whose bandwidth the exact walk computes (each costs up to k-1 max-flows)."""

Key = tuple[int, int, int, int, int, int]
"""(-bandwidth, socket groups, fragmentation, -pair bandwidth inside, PCIe distance, lexicographic rank)."""

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def search(
    topology: NodeTopology,
    free: tuple[int, ...],
    k: int,
    exact_mbs: Callable[[tuple[int, ...]], int],
    *,
    exact_sets: int = EXACT_SETS,
    max_evaluations: int = MAX_EXACT_EVALUATIONS,
) -> tuple[tuple[int, ...], int, int, int]:
    """The best ``k`` of the sorted GPUs ``free`` (at least ``k``): (gpus, bandwidth, groups, fragmentation).

    Args:
        topology: the node.
        free: the free GPU indices, ascending.
        k: how many GPUs the pod needs (1..len(free)).
        exact_mbs: the exact bandwidth of a set (memoised by the caller).
        exact_sets: above this many k-subsets the bounded search is used instead of the exact one.
        max_evaluations: the exact walk stops after this many exact evaluations (at least one).
    """
    if comb(len(free), k) <= exact_sets:
        member = _all_subsets(len(free), k)
        ranks = _keys(topology, free, member, upper=True)
        order = np.lexsort(ranks[::-1])
        best: Key | None = None
        for evaluated, row in enumerate(order):
            ranked = _key(ranks, int(row))
            if best is not None and (ranked > best or evaluated >= max_evaluations):
                break
            gpus = _gpus(free, member[row])
            exact = (-exact_mbs(gpus), *ranked[1:])
            if best is None or exact < best:
                best, chosen = exact, gpus
        assert best is not None  # at least one subset: len(free) >= k
        return chosen, -best[0], best[1], best[2]
    member = _family(topology, free, k)
    ranks = _keys(topology, free, member, upper=False)
    row = int(np.lexsort(ranks[::-1])[0])
    gpus = _gpus(free, member[row])
    return gpus, exact_mbs(gpus), int(ranks[1][row]), int(ranks[2][row])


def _all_subsets(n: int, k: int) -> npt.NDArray[np.bool_]:
    """Every k-subset of range(n) as a row of a membership matrix, in lexicographic order."""
    count = comb(n, k)
    picks = np.fromiter(chain.from_iterable(combinations(range(n), k)), dtype=np.intp, count=count * k)
    member = np.zeros((count, n), dtype=bool)
    member[np.repeat(np.arange(count), k), picks] = True
    return member


def _family(topology: NodeTopology, free: tuple[int, ...], k: int) -> npt.NDArray[np.bool_]:
    """The lowest k free GPUs, and the set grown greedily from each free GPU (module docstring)."""
    n = len(free)
    pair = np.array(topology.pair_mbs, dtype=np.float64)[np.ix_(free, free)]
    rows = [np.arange(n) < k]
    for seed in range(n):
        chosen = np.zeros(n, dtype=bool)
        chosen[seed] = True
        weakest, total = pair[seed].copy(), pair[seed].copy()
        for _ in range(k - 1):
            # Largest weakest pair, then largest total; argmax takes the lowest index among ties.
            score = np.where(chosen, -np.inf, weakest * (total.max() + 1) + total)
            pick = int(np.argmax(score))
            chosen[pick] = True
            weakest = np.minimum(weakest, pair[pick])
            total = total + pair[pick]
        rows.append(chosen)
    member = np.unique(np.array(rows), axis=0)
    # np.unique sorts rows as bytes, False before True: restore the lexicographic order of the sets.
    return member[np.lexsort(~member.T[::-1])]


def _keys(
    topology: NodeTopology, free: tuple[int, ...], member: npt.NDArray[np.bool_], *, upper: bool
) -> Ints:
    """The ranking key of every row of ``member``, one key component per row of the result.

    The first component is minus the cut upper bound (``upper``) or minus the weakest pair (otherwise).
    """
    sets = member.astype(np.float64)
    pair = np.array(topology.pair_mbs, dtype=np.float64)[np.ix_(free, free)]
    distance = np.array(topology.distance, dtype=np.float64)[np.ix_(free, free)]
    locality = np.array([topology.locality[g] for g in free])
    to_set = sets @ pair
    if upper:
        bound = _upper_bounds(topology, free, member)
    else:
        pairs = member[:, :, None] & member[:, None, :] & ~np.eye(len(free), dtype=bool)[None]
        bound = np.where(pairs, pair[None], np.inf).min(axis=(1, 2))
        bound[member.sum(axis=1) < 2] = 0
    groups = (sets @ (locality[:, None] == np.unique(locality)[None]).astype(np.float64) > 0).sum(axis=1)
    return np.array(
        [
            -bound,
            groups,
            (to_set * (1 - sets)).sum(axis=1),
            -(to_set * sets).sum(axis=1) // 2,
            ((sets @ distance) * sets).sum(axis=1) // 2,
            np.arange(len(member)),
        ]
    ).astype(np.int64)


def _upper_bounds(topology: NodeTopology, free: tuple[int, ...], member: npt.NDArray[np.bool_]) -> Floats:
    """:meth:`NodeTopology.upper_bound` of every row of ``member``, as arrays (same cuts, same values).

    All cuts are taken at once: one matrix product per quantity, with one column per (cut, GPU).
    """
    n, sets = len(free), member.astype(np.float64)
    own = np.array([topology.own_mbs[g] for g in free], dtype=np.float64)
    direct = np.array(topology.direct_mbs, dtype=np.float64)[np.ix_(free, free)]
    switch = np.array([topology.switch_mbs[g] for g in free], dtype=np.float64)
    has_direct = not topology.document.nvswitch
    per_gpu = own[None] + sets @ direct if has_direct else np.broadcast_to(own, member.shape)
    best = np.where(member, per_gpu, np.inf).min(axis=1)
    size = member.sum(axis=1)
    cuts = [(mask, capacity) for mask, capacity in topology.cuts if any(mask >> g & 1 for g in free)]
    if cuts:
        sides = np.array([[mask >> g & 1 for mask, _ in cuts] for g in free], dtype=np.float64)  # n x cuts
        capacity = np.array([c for _, c in cuts], dtype=np.float64)
        inside = sets @ sides
        splits = (inside > 0) & (inside < size[:, None])
        if has_direct and direct.any():
            # Column (c, b): the direct links from the set's GPUs inside cut c to GPU b outside it.
            across = (sides.T[:, :, None] * (1 - sides.T)[:, None, :]) * direct[None]  # cuts x n x n
            reach = (sets @ across.transpose(1, 0, 2).reshape(n, -1)).reshape(len(member), len(cuts), n)
            crossing = (reach * sets[:, None, :]).sum(axis=2)
        elif has_direct:
            crossing = np.zeros_like(inside)
        else:
            switch_inside = sets @ (switch[:, None] * sides)
            crossing = np.minimum(switch_inside, (sets @ switch)[:, None] - switch_inside)
        value = np.where(splits, capacity[None] + crossing, np.inf).min(axis=1)
        best = np.minimum(best, value)
    best[size < 2] = 0
    result: Floats = best
    return result


def _key(ranks: Ints, row: int) -> Key:
    column = ranks[:, row]
    return (int(column[0]), int(column[1]), int(column[2]), int(column[3]), int(column[4]), int(column[5]))


def _gpus(free: tuple[int, ...], row: npt.NDArray[np.bool_]) -> tuple[int, ...]:
    return tuple(free[i] for i in np.flatnonzero(row))
