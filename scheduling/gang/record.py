"""The bind plan a gang writes on its PodGroup before its first Binding, and recovery from it.

If the extender dies between a gang's Bindings, the gang is half-bound; Kubernetes cannot unbind a pod,
so a restarted extender must finish the job from what the API server holds. The plan annotation names
every member (UID, node, GPUs): the gang's ``Assignment`` actions (``scheduling.plan``), written before
they are carried out. Recovery completes the gang when every planned member still exists
(binding the rest exactly as planned), and otherwise rolls it back by deleting the bound members, whose
controller (Job, MPIJob, ...) recreates them; either way no gang runs half-placed.

A member that was bound as planned and has finished since (Succeeded or Failed) was placed: it counts as
bound, not as lost. The members therefore come from the API server, finished ones included, not from a
cache of live pods; read from such a cache, a member that ran for a second before the crash looked gone,
the gang was rolled back, and the members still waiting counted "3 of 4 pods exist" for ever.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduling.model import TERMINAL_PHASES, Pod
from scheduling.plan import Assignment, Plan

FORMAT_VERSION = 1


class PlanError(ValueError):
    """A plan annotation that cannot be read."""


class RecoveryKind(enum.Enum):
    """How a gang found with a plan annotation ends; the value names it in metrics."""

    BOUND = "bound"
    """Every planned member was bound already: the crash came after the last Binding."""
    COMPLETED = "completed"
    """Members were left unbound: they are bound as planned."""
    ROLLED_BACK = "rolled_back"
    """A planned member is gone: the members still on their nodes are deleted."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What to do with a gang found with a plan annotation.

    Attributes:
        kind: how the gang ends.
        bind: the assignments still to carry out, as planned (completing the gang).
        delete: bound members still holding their node to delete (rolling the gang back).
        reason: why, for the event.
    """

    kind: RecoveryKind
    bind: tuple[Assignment, ...]
    delete: tuple[Pod, ...]
    reason: str


def encode_plan(assignments: Iterable[Assignment]) -> str:
    """The annotation value: compact JSON, members sorted by name (the gang's one namespace is its own).

    >>> encode_plan([Assignment("ml/w0", "u1", "n1", (0, 1))])
    '{"members":[{"gpus":[0,1],"name":"w0","node":"n1","uid":"u1"}],"v":1}'
    """
    rows = [
        {"gpus": list(a.gpus), "name": a.pod.partition("/")[2], "node": a.node, "uid": a.uid}
        for a in assignments
    ]
    rows.sort(key=lambda r: str(r["name"]))
    return json.dumps({"members": rows, "v": FORMAT_VERSION}, separators=(",", ":"), sort_keys=True)


def decode_plan(text: str, namespace: str) -> Plan:
    """Read an annotation written by ``encode_plan`` on a PodGroup of ``namespace``.

    Raises:
        PlanError: the text is not a version-1 plan.
    """
    try:
        body = json.loads(text)
        if body.get("v") != FORMAT_VERSION:
            msg = f"plan version {body.get('v')!r} is not {FORMAT_VERSION}"
            raise PlanError(msg)
        return Plan(
            tuple(
                Assignment(
                    f"{namespace}/{m['name']}",
                    str(m["uid"]),
                    str(m["node"]),
                    tuple(int(g) for g in m["gpus"]),
                )
                for m in body["members"]
            )
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        if isinstance(exc, PlanError):
            raise
        msg = f"unreadable gang plan: {exc}"
        raise PlanError(msg) from None


def plan_recovery(plan: Plan, pods_by_name: Mapping[str, Pod]) -> Recovery:
    """Decide how to finish a gang whose plan annotation is still on its PodGroup.

    Args:
        plan: the written plan, its members' assignments.
        pods_by_name: every pod of the gang by name, finished ones included (from the API server).
    """
    to_bind: list[Assignment] = []
    placed: list[Pod] = []
    lost: list[str] = []
    for member in sorted(plan.assignments, key=lambda a: a.pod):
        name = member.pod.partition("/")[2]
        pod = pods_by_name.get(name)
        if pod is None or pod.uid != member.uid or pod.terminating:
            lost.append(name)
        elif pod.node_name is None:
            if pod.phase in TERMINAL_PHASES:  # failed before it was ever bound: it will not run
                lost.append(name)
            else:
                to_bind.append(member)
        elif pod.node_name == member.node:
            placed.append(pod)
        else:
            lost.append(name)
    finished = sum(1 for p in placed if p.phase in TERMINAL_PHASES)
    ran = f" ({finished} of them finished since)" if finished else ""
    if not to_bind:
        # Every member still here is bound: the bind finished. A member lost since then is the
        # placement manager's business (stale gangs, with a grace period), not a crash to undo.
        return Recovery(RecoveryKind.BOUND, (), (), f"every planned member was bound{ran}")
    if lost:
        running = tuple(p for p in placed if p.phase not in TERMINAL_PHASES)
        reason = (
            f"the bind was interrupted and members {', '.join(lost)} are gone, so the gang cannot be "
            f"completed; deleting the {len(running)} bound member(s) still running; the "
            f"{len(to_bind)} unbound member(s) wait for the gang to be whole again"
        )
        return Recovery(RecoveryKind.ROLLED_BACK, (), running, reason)
    return Recovery(
        RecoveryKind.COMPLETED,
        tuple(to_bind),
        (),
        f"binding the {len(to_bind)} members the interrupted bind left; {len(placed)} were bound{ran}",
    )
