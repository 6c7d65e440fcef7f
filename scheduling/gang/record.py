"""The bind plan a gang writes on its PodGroup before its first Binding.

If the extender dies between a gang's Bindings, the gang is half-bound; Kubernetes cannot unbind a pod,
so a restarted extender must finish the job from what the API server holds. The plan annotation names
every member (UID, node, GPUs): the gang's ``Assignment`` actions (``scheduling.plan``), written before
they are carried out. What recovery does with it is ``scheduling.gang.recovery``'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from scheduling.plan import Assignment, Plan

FORMAT_VERSION = 1


class PlanError(ValueError):
    """A plan annotation that cannot be read."""


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
        plan = Plan(
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
    # The binder writes each member once; a member named twice (by hand) would be bound twice, and
    # recovery would ask the API server about as many nodes as the text lists.
    for seen in ({a.pod for a in plan.assignments}, {a.uid for a in plan.assignments}):
        if len(seen) != len(plan.assignments):
            msg = "unreadable gang plan: a member is named twice"
            raise PlanError(msg)
    return plan
