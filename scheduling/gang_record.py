"""The bind plan a gang writes on its PodGroup before its first Binding, and recovery from it.

If the extender dies between a gang's Bindings, the gang is half-bound; Kubernetes cannot unbind a pod,
so a restarted extender must finish the job from what the API server holds. The plan annotation names
every member (UID, node, GPUs). Recovery completes the gang when every planned member still exists
(binding the rest exactly as planned), and otherwise rolls it back by deleting the bound members, whose
controller (Job, MPIJob, ...) recreates them; either way no gang runs half-placed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduling.model import Pod

FORMAT_VERSION = 1


class PlanError(ValueError):
    """A plan annotation that cannot be read."""


@dataclass(frozen=True, slots=True)
class PlannedMember:
    """One member of a written plan."""

    uid: str
    name: str
    node: str
    gpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Recovery:
    """What to do with a gang found with a plan annotation.

    Attributes:
        bind: members to bind as planned (completing the gang).
        delete: bound members to delete (rolling the gang back).
        reason: why, for the event.
    """

    bind: tuple[PlannedMember, ...]
    delete: tuple[Pod, ...]
    reason: str

    @property
    def done(self) -> bool:
        """Nothing left to do: the plan annotation can be removed."""
        return not self.bind and not self.delete


def encode_plan(members: Iterable[PlannedMember]) -> str:
    """The annotation value: compact JSON, members sorted by name.

    >>> encode_plan([PlannedMember("u1", "w0", "n1", (0, 1))])
    '{"members":[{"gpus":[0,1],"name":"w0","node":"n1","uid":"u1"}],"v":1}'
    """
    rows = [{"gpus": list(m.gpus), "name": m.name, "node": m.node, "uid": m.uid} for m in members]
    rows.sort(key=lambda r: str(r["name"]))
    return json.dumps({"members": rows, "v": FORMAT_VERSION}, separators=(",", ":"), sort_keys=True)


def decode_plan(text: str) -> tuple[PlannedMember, ...]:
    """Read an annotation written by ``encode_plan``.

    Raises:
        PlanError: the text is not a version-1 plan.
    """
    try:
        body = json.loads(text)
        if body.get("v") != FORMAT_VERSION:
            msg = f"plan version {body.get('v')!r} is not {FORMAT_VERSION}"
            raise PlanError(msg)
        return tuple(
            PlannedMember(str(m["uid"]), str(m["name"]), str(m["node"]), tuple(int(g) for g in m["gpus"]))
            for m in body["members"]
        )
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        if isinstance(exc, PlanError):
            raise
        msg = f"unreadable gang plan: {exc}"
        raise PlanError(msg) from None


def plan_recovery(plan: Iterable[PlannedMember], pods_by_name: Mapping[str, Pod]) -> Recovery:
    """Decide how to finish a gang whose plan annotation is still on its PodGroup.

    Args:
        plan: the planned members.
        pods_by_name: the gang's live pods, by name.
    """
    to_bind: list[PlannedMember] = []
    placed: list[Pod] = []
    lost: list[str] = []
    for member in sorted(plan, key=lambda m: m.name):
        pod = pods_by_name.get(member.name)
        if pod is None or pod.uid != member.uid or pod.terminating:
            lost.append(member.name)
        elif pod.node_name is None:
            to_bind.append(member)
        elif pod.node_name == member.node:
            placed.append(pod)
        else:
            lost.append(member.name)
    if not to_bind:
        # Every member still here is bound: the bind finished. A member lost since then is the
        # placement manager's business (stale gangs, with a grace period), not a crash to undo.
        return Recovery((), (), "every planned member was bound")
    if lost:
        reason = (
            f"the bind was interrupted and members {', '.join(lost)} are gone, so the gang cannot be "
            f"completed; deleting the {len(placed)} bound members"
        )
        return Recovery((), tuple(placed), reason)
    return Recovery(tuple(to_bind), (), f"binding the {len(to_bind)} members the interrupted bind left")
