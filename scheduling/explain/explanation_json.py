"""An explanation as JSON-ready values: what `phalanx why -o json` prints and the visibility endpoint serves.

One function for both, so a user asking the placement manager gets the very document an admin's
``phalanx why`` computes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain.explanation import Explanation, PlacedPod
from scheduling.explain.target import Target


def _placed(pods: Iterable[PlacedPod]) -> list[dict[str, Any]]:
    return [{"pod": p.pod, "node": p.node, "gpus": list(p.gpus)} for p in pods]


def explanation_item(said: Explanation) -> dict[str, Any]:
    """The explanation as JSON-ready values, keys in the order a reader wants them."""
    queue, gang, what_if = said.queue, said.gang, said.what_if
    return {
        "cause": said.cause.value,
        "verdict": said.verdict,
        "filterMessage": said.filter_message,
        "admission": said.admission,
        "queue": None
        if queue is None
        else {
            "name": queue.queue,
            "position": queue.position,
            "pending": queue.pending,
            "inQueue": queue.in_queue,
            "ahead": list(queue.ahead),
            "standing": queue.standing,
            "rule": queue.rule,
            "sentence": queue.sentence,
            "holders": list(queue.holders),
            "problems": list(queue.problems),
            "shares": [
                {
                    "resource": s.resource,
                    "quota": s.quota,
                    "limit": s.limit,
                    "deserved": s.deserved,
                    "fairShare": s.fair_share,
                    "allocated": s.allocated,
                    "requested": s.requested,
                }
                for s in queue.shares
            ],
        },
        "gang": None
        if gang is None
        else {
            "minMember": gang.min_member,
            "present": gang.present,
            "bound": gang.bound,
            "waiting": gang.waiting,
            "podGroup": gang.podgroup,
        },
        "nodes": [
            {"reason": g.kind, "message": g.message, "count": g.count, "nodes": list(g.nodes)}
            for g in said.nodes
        ],
        "bound": _placed(said.bound),
        "whatIf": None
        if what_if is None
        else {
            "finished": list(what_if.finished),
            "freedGpus": what_if.freed_gpus,
            "plan": _placed(what_if.plan),
        },
    }


def about(target: Target, snapshot: ClusterSnapshot) -> set[tuple[str, str]]:
    """The (kind, name) of every object whose events explain ``target``: it, its PodGroup, its members."""
    objects = {("Pod" if target.kind == "pod" else "PodGroup", target.name)}
    if target.kind == "pod":
        pod = snapshot.pod(target.namespace, target.name)
        if pod is not None and pod.group is not None:
            objects.add(("PodGroup", pod.group))
    else:
        objects |= {("Pod", m.name) for m in snapshot.members(target.key)}
    return objects
