"""Where an elastic job's waiting and new workers go this round: only into room the round leaves free.

The layout (``layout``) packs every elastic job afresh, as if each worker could go anywhere; the moves
that would reach it are few a round (``elastic_planner``: hysteresis, limits, cooldown, the minimum).
Pinned to the layout's target alone, a grown worker often lands on room another job still holds: it
waits, pinned, for a move that is not coming (replaying Pollux workload 1, half of all grown workers
found their node full). So the workers a job still needs go only to the nodes of its target, and only
as far as each has room once the round's shrinks and moves are made, less the room kept for waiting
gangs and what other jobs' pinned waiting workers will take. A job grows by as many workers as that
room holds; the rest of its growth waits for a later round, whose layout starts from where things are.

Only the target's nodes are used, most lacking first (then by name): the target is the fewest nodes
for the job, so a worker put elsewhere would spread it, and be moved back later at the cost of a
restart. Jobs take room in the order of the workers they still need, most first, then by key, so the
same cluster gives the same answer every time.

**Compact as it grows.** The target is the fewest nodes for the size the job *aims* at; while the
room is short, the job reaches only part of it, and a part can span more nodes than its own size needs
(a job aiming at 6 workers on 4-GPU nodes, whose node is full, reached 3 as 1 + 2 on two nodes). A
growing job may not do that unless its model says spreading is free for it (``Throughput.
spreads_free``: measured across nodes, at most 5% slower), so it grows only as far as it stays on the
fewest nodes for the size it reaches: on the nodes it runs on first, then on the nodes with the most
room, taking one more node only when the size reached then needs it. What it does not take waits for
a later round. The workers a job was declared with are no growth: they go wherever its target has
room. Replaying the Pollux workloads, this put 85-90% of multi-GPU jobs on their fewest nodes at every
decision, up from 73-82%; over nine runs per workload with the settings nudged, it cost no measurable
average JCT on three workloads and about 1% on the fourth (``docs/results/simulator/README.md``).
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass

from scheduling.cluster.statement import Statement
from scheduling.elastic.gain import nodes_for
from scheduling.elastic.job import ElasticJob
from scheduling.elastic.layout import Layout


@dataclass(frozen=True, slots=True)
class Need:
    """What one job still has to place this round.

    Attributes:
        key: the job's key.
        workers: how many workers it still needs placed (its size less what runs or keeps a pin).
        per_worker: GPUs of one worker.
        aim: its layout target, node -> workers.
        present: node -> its workers that run there or wait pinned there and keep their place.
        may_spread: whether it may span more nodes than the size it reaches needs (it is not
            growing, or its model says spreading is free for it).
    """

    key: str
    workers: int
    per_worker: int
    aim: Mapping[str, int]
    present: Mapping[str, int]
    may_spread: bool = True


def place_needs(
    needs: Sequence[Need], room: Mapping[str, int], *, anywhere: bool = False, node_gpus: int = 0
) -> dict[str, dict[str, int]]:
    """Per job, node -> workers placed there this round (see the module docstring).

    Args:
        needs: the jobs with workers to place.
        room: node -> GPUs free for elastic workers once the round's shrinks and moves are made.
        anywhere: what the target's nodes cannot hold goes to other free room too: the nodes the job
            runs on first, then a node that takes all the rest (the one it fills best), else the
            roomiest. For a cluster where moves are off: a target a move would reach is never reached
            there, and a job held to it would never grow.
        node_gpus: GPUs of the largest node, for the fewest nodes a size needs (0: not known, no job is
            held to them). Not used with ``anywhere``: where moves are off, topology is off too.

    Returns:
        Every job of ``needs`` (an empty map for one that found no room), by key.
    """
    return placements(needs, room, anywhere=anywhere, node_gpus=node_gpus)[0]


def placements(
    needs: Sequence[Need], room: Mapping[str, int], *, anywhere: bool = False, node_gpus: int = 0
) -> tuple[dict[str, dict[str, int]], frozenset[str]]:
    """``place_needs``, and the jobs the compact rule held to fewer workers than the room allowed."""
    left = {node: max(0, gpus) for node, gpus in room.items()}
    placed: dict[str, dict[str, int]] = {}
    held: set[str] = set()
    for need in sorted(needs, key=lambda n: (-n.workers * n.per_worker, n.key)):
        if anywhere or need.may_spread or node_gpus <= 0:  # the rule does not apply: take room as found
            placed[need.key] = _place(need, left, anywhere)
            continue
        trial = dict(left)  # the room is copied only for a job the rule may hold
        chosen = _place(need, trial, anywhere)
        if not _compact(need, chosen, node_gpus):
            spread = sum(chosen.values())
            trial = dict(left)
            chosen = _place_compact(need, trial, node_gpus)
            if sum(chosen.values()) < spread:
                held.add(need.key)
        left = trial
        placed[need.key] = chosen
    return placed, frozenset(held)


def _compact(need: Need, chosen: Mapping[str, int], node_gpus: int) -> bool:
    """Whether ``chosen`` adds no node beyond the fewest the size the job reaches needs.

    A job that runs spread already (a shrink kept its lowest indices on two nodes) may still grow on
    the nodes it runs on: that spreads it no further.
    """
    own = {n for n, count in need.present.items() if count}
    nodes = own | {n for n, count in chosen.items() if count}
    reached = sum(need.present.values()) + sum(chosen.values())
    return len(nodes) <= max(len(own), nodes_for(reached, need.per_worker, node_gpus))


def _place_compact(need: Need, left: dict[str, int], node_gpus: int) -> dict[str, int]:
    """The most workers that keep the job on its fewest nodes (see the module docstring).

    The nodes it runs on are kept; to them are added, one at a time, the nodes with the most room
    (then by name), and of each such set the one reaching the most workers compactly wins (ties: the
    fewer nodes).
    """
    per = max(need.per_worker, 1)
    own = sorted(n for n, count in need.present.items() if count)
    others = sorted(
        (n for n in left if n not in need.present and left[n] >= per), key=lambda n: (-left[n], n)
    )
    most = nodes_for(sum(need.present.values()) + need.workers, need.per_worker, node_gpus)
    best: dict[str, int] = {}
    for extra in range(min(len(others), most) + 1):
        trial = dict(left)
        chosen = _fill(need, own + others[:extra], trial)
        if _compact(need, chosen, node_gpus) and sum(chosen.values()) > sum(best.values()):
            best = chosen
    for node, count in best.items():
        left[node] -= count * per
    return best


def _fill(need: Need, nodes: Sequence[str], left: dict[str, int]) -> dict[str, int]:
    """Place the job's workers on ``nodes`` only, its own first, then the roomiest; taken from ``left``."""
    per = max(need.per_worker, 1)
    out: dict[str, int] = {}
    todo = need.workers
    for node in sorted(nodes, key=lambda n: (-need.present.get(n, 0), -left.get(n, 0), n)):
        count = min(todo, left.get(node, 0) // per)
        if count > 0:
            out[node] = count
            left[node] -= count * per
            todo -= count
    return dict(sorted(out.items()))


def _place(need: Need, left: dict[str, int], anywhere: bool) -> dict[str, int]:
    """Place one job's workers into ``left`` (taken from it); node -> workers."""
    per = max(need.per_worker, 1)
    out: dict[str, int] = {}
    todo = need.workers

    def take(node: str, most: int) -> None:
        nonlocal todo
        count = min(most, todo, left.get(node, 0) // per)
        if count > 0:
            out[node] = out.get(node, 0) + count
            left[node] -= count * per
            todo -= count

    lacking = {n: need.aim[n] - need.present.get(n, 0) for n in need.aim}
    for node in sorted(lacking, key=lambda n: (-lacking[n], n)):
        take(node, lacking[node])
    if anywhere:
        for node in sorted(need.present, key=lambda n: (-need.present[n], n)):
            take(node, todo)
        while todo > 0:
            fits = [n for n in sorted(left) if left[n] // per >= todo]
            roomy = [n for n in sorted(left) if left[n] // per > 0]
            if not roomy:
                break
            take(
                min(fits, key=lambda n: (left[n], n)) if fits else min(roomy, key=lambda n: (-left[n], n)),
                todo,
            )
    return dict(sorted(out.items()))


def reachable(
    jobs: Sequence[ElasticJob],
    sizes: Mapping[str, int],
    layout: Layout,
    statement: Statement,
    reserved: Mapping[str, int],
    *,
    anywhere: bool = False,
    compact: Container[str] = frozenset(),
    node_gpus: int = 0,
) -> Layout:
    """The layout this round reaches: what stays, plus what each job still needs where room is left.

    Args:
        jobs: the elastic jobs.
        sizes: each job's size this round (the paced goal).
        layout: the layout the round aimed at (its targets are the aims).
        statement: the round so far: its shrinks and moves made, no growth yet.
        reserved: node -> GPUs kept free for waiting gangs.
        anywhere: place what the targets cannot hold in other free room too (``place_needs``).
        compact: the jobs that grow this round and whose model does not say spreading is free for
            them: they grow only as far as they stay on the fewest nodes (``place_needs``). A job's
            waiting workers within its size are no growth: they go wherever its target has room, as
            the workers it was declared with must run somewhere.
        node_gpus: GPUs of the largest node (``place_needs``).

    Returns:
        Per job, its running workers (where the round's moves put them) and its pinned waiting workers
        that keep their place, plus the workers placed by ``place_needs``; ``unplaced`` holds what
        found no room, ``moves`` the layout's and ``held_compact`` the jobs the compact rule held.
    """
    moved = {m.uid: m.target for m in statement.commit().migrations}
    left: dict[str, int] = {}
    for name, node in sorted(statement.snapshot.nodes.items()):
        room = statement.room(name)
        usable = room is not None and node.topology_problem is None
        left[name] = max(0, room.count - reserved.get(name, 0)) if room is not None and usable else 0
    present: dict[str, dict[str, int]] = {}
    for job in sorted(jobs, key=lambda j: j.key):
        here = present.setdefault(job.key, {})
        for pod in job.workers[: sizes.get(job.key, 0)]:
            if pod.terminating:
                continue
            if pod.holds_resources and pod.node_name is not None:
                node_name = moved.get(pod.uid, pod.node_name)
                if node_name in left:
                    here[node_name] = here.get(node_name, 0) + 1
            elif pod.node_name is None and pod.pinned:
                node_name = min(pod.pinned)
                if left.get(node_name, 0) >= job.worker.gpus:  # a pin keeps its place while room does
                    left[node_name] -= job.worker.gpus
                    here[node_name] = here.get(node_name, 0) + 1
    needs = [
        Need(
            j.key,
            sizes.get(j.key, 0) - sum(present[j.key].values()),
            j.worker.gpus,
            layout.targets.get(j.key, {}),
            present[j.key],
            j.key not in compact,
        )
        for j in jobs
        if sizes.get(j.key, 0) > sum(present[j.key].values())
    ]
    placed, held = placements(needs, left, anywhere=anywhere, node_gpus=node_gpus)
    targets: dict[str, dict[str, int]] = {}
    for key, here in sorted(present.items()):
        merged = dict(here)
        for node_name, count in placed.get(key, {}).items():
            merged[node_name] = merged.get(node_name, 0) + count
        targets[key] = dict(sorted(merged.items()))
    unplaced = {n.key: n.workers - sum(placed[n.key].values()) for n in needs}
    return Layout(targets, layout.moves, {k: v for k, v in sorted(unplaced.items()) if v > 0}, held)
