"""Which node each waiting worker of an elastic job is pinned to, from the job's target layout.

One rule, used by both callers that pin (the placement manager's pass, for pods already waiting, and its
admission webhook, for a pod being created), so a worker gets the same node whichever pins it first:

- what runs, or is already pinned, takes its place in the target first;
- then each waiting worker, lowest replica index first, goes to the node of the target that still has
  room and holds most of the job's workers (ties by node name).

So a job's highest indices sit on the node it uses least, and when it shrinks (the operator removes the
highest indices) that node is freed first (Voda's rule). A worker for which the target has no room left
is not pinned: it waits for the next plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduling.model import Pod


def waiting_unpinned(workers: Sequence[Pod]) -> list[Pod]:
    """The workers that wait for a node and carry no pin yet, in the order given (replica index)."""
    return [p for p in workers if p.node_name is None and not p.terminating and not p.pinned]


def choose_pins(target: Mapping[str, int], workers: Sequence[Pod]) -> tuple[tuple[Pod, str], ...]:
    """Pin the job's waiting, unpinned workers to the nodes of ``target`` that still have room.

    Args:
        target: node -> workers the job's layout puts there.
        workers: every worker of the job, ordered by replica index.

    Returns:
        (worker, node) for each worker to pin, lowest index first; workers left out find no room.
    """
    room = dict(target)
    held: dict[str, int] = {}
    for pod in workers:
        node = pod.node_name if pod.holds_resources else next(iter(sorted(pod.pinned)), None)
        if node is not None:
            held[node] = held.get(node, 0) + 1
            if room.get(node, 0) > 0:
                room[node] -= 1
    pins = []
    for pod in waiting_unpinned(workers):
        open_nodes = [n for n in room if room[n] > 0]
        if not open_nodes:
            break
        node = min(open_nodes, key=lambda n: (-held.get(n, 0), n))
        room[node] -= 1
        held[node] = held.get(node, 0) + 1
        pins.append((pod, node))
    return tuple(pins)
