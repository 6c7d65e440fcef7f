"""Which node each waiting worker of an elastic job is pinned to, from the job's target layout.

One rule, used by both callers that pin (the placement manager's pass, for pods already waiting, and its
admission webhook, for a pod being created), so a worker gets the same node whichever pins it first:

- what runs, or is already pinned, takes its place in the target first;
- then each waiting worker, lowest replica index first, goes to the node of the target that still has
  room and holds most of the job's workers (ties by node name).

So a job's highest indices sit on the node it uses least, and when it shrinks (the operator removes the
highest indices) that node is freed first (Voda's rule). A worker for which the target has no room left
is not pinned: it waits for the next plan. A waiting worker pinned by an older plan to a node that has
no place for it any more is found by ``stale_pins``, so that the pass can have it re-created.
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
    room, held = _taken(target, workers, stale=())
    return _place(room, held, waiting_unpinned(workers))


def stale_pins(target: Mapping[str, int], workers: Sequence[Pod]) -> tuple[tuple[Pod, str], ...]:
    """Waiting workers pinned to a node the target has no place for them on, and where they would go.

    A pin is for good (a toleration cannot be taken off a pod), so a worker pinned by an older plan (the
    room on its node was taken since: a preemption, another job) waits forever unless it is deleted and
    re-created, when the new plan pins it. Only a worker the target has a place for elsewhere is
    returned, with that place: one for which there is none would be re-created to wait all the same.

    Args:
        target: node -> workers the job's layout puts there.
        workers: every worker of the job, ordered by replica index.
    """
    pinned_waiting = [p for p in workers if p.node_name is None and not p.terminating and p.pinned]
    room, held = _taken(target, workers, stale=pinned_waiting)
    stale = []
    for pod in pinned_waiting:  # in index order, each keeps its place while there is one
        node = min(pod.pinned)
        if room.get(node, 0) > 0:
            room[node] -= 1
            held[node] = held.get(node, 0) + 1
        else:
            stale.append(pod)
    if not stale:
        return ()
    stale_uids = {p.uid for p in stale}
    moving = stale_uids | {p.uid for p in waiting_unpinned(workers)}
    waiting = [p for p in workers if p.uid in moving]  # index order, the stale among the unpinned
    return tuple((p, n) for p, n in _place(room, held, waiting) if p.uid in stale_uids)


def _taken(
    target: Mapping[str, int], workers: Sequence[Pod], *, stale: Sequence[Pod]
) -> tuple[dict[str, int], dict[str, int]]:
    """Room left in ``target`` and workers held per node, once what runs or is pinned takes its place.

    Workers listed in ``stale`` take no place.
    """
    skip = {p.uid for p in stale}
    room = dict(target)
    held: dict[str, int] = {}
    for pod in workers:
        if pod.uid in skip:
            continue
        node = pod.node_name if pod.holds_resources else next(iter(sorted(pod.pinned)), None)
        if node is not None:
            held[node] = held.get(node, 0) + 1
            if room.get(node, 0) > 0:
                room[node] -= 1
    return room, held


def _place(room: dict[str, int], held: dict[str, int], waiting: Sequence[Pod]) -> tuple[tuple[Pod, str], ...]:
    """Each of ``waiting`` in order to the node with room that holds most of the job (ties by name)."""
    pins = []
    for pod in waiting:
        open_nodes = [n for n in room if room[n] > 0]
        if not open_nodes:
            break
        node = min(open_nodes, key=lambda n: (-held.get(n, 0), n))
        room[node] -= 1
        held[node] = held.get(node, 0) + 1
        pins.append((pod, node))
    return tuple(pins)
