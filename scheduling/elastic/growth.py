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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scheduling.cluster.statement import Statement
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
    """

    key: str
    workers: int
    per_worker: int
    aim: Mapping[str, int]
    present: Mapping[str, int]


def place_needs(
    needs: Sequence[Need], room: Mapping[str, int], *, anywhere: bool = False
) -> dict[str, dict[str, int]]:
    """Per job, node -> workers placed there this round (see the module docstring).

    Args:
        needs: the jobs with workers to place.
        room: node -> GPUs free for elastic workers once the round's shrinks and moves are made.
        anywhere: what the target's nodes cannot hold goes to other free room too: the nodes the job
            runs on first, then a node that takes all the rest (the one it fills best), else the
            roomiest. For a cluster where moves are off: a target a move would reach is never reached
            there, and a job held to it would never grow.

    Returns:
        Every job of ``needs`` (an empty map for one that found no room), by key.
    """
    left = {node: max(0, gpus) for node, gpus in room.items()}
    placed: dict[str, dict[str, int]] = {}
    for need in sorted(needs, key=lambda n: (-n.workers * n.per_worker, n.key)):
        placed[need.key] = _place(need, left, anywhere)
    return placed


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
) -> Layout:
    """The layout this round reaches: what stays, plus what each job still needs where room is left.

    Args:
        jobs: the elastic jobs.
        sizes: each job's size this round (the paced goal).
        layout: the layout the round aimed at (its targets are the aims).
        statement: the round so far: its shrinks and moves made, no growth yet.
        reserved: node -> GPUs kept free for waiting gangs.
        anywhere: place what the targets cannot hold in other free room too (``place_needs``).

    Returns:
        Per job, its running workers (where the round's moves put them) and its pinned waiting workers
        that keep their place, plus the workers placed by ``place_needs``; ``unplaced`` holds what
        found no room and ``moves`` the layout's.
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
        )
        for j in jobs
        if sizes.get(j.key, 0) > sum(present[j.key].values())
    ]
    placed = place_needs(needs, left, anywhere=anywhere)
    targets: dict[str, dict[str, int]] = {}
    for key, here in sorted(present.items()):
        merged = dict(here)
        for node_name, count in placed.get(key, {}).items():
            merged[node_name] = merged.get(node_name, 0) + count
        targets[key] = dict(sorted(merged.items()))
    unplaced = {n.key: n.workers - sum(placed[n.key].values()) for n in needs}
    return Layout(targets, layout.moves, {k: v for k, v in sorted(unplaced.items()) if v > 0})
