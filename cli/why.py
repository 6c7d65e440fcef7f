"""``phalanx why NS/POD`` and ``phalanx why podgroup/NAME -n NS``: why it waits, in plain words.

The answer is the core's (``scheduling.explain``): the extender's own filter asked offline on one read of
the cluster, with kube-scheduler's own node filters first, so it says what the extender would say now.
Beside it, the last Events about the pod (and its PodGroup) or about the gang (and its members): what
kube-scheduler and phalanx actually told the user, and when.

What one read cannot see: GPUs the extender promised to a bind in flight or reserved for a gang, which
live in its memory only; a gang being bound may therefore read as "fits now".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import click
import yaml

from cli.cluster import api_call, connect, read, wall_clock
from cli.options import cluster_options
from cli.render import API_VERSION
from cli.settings import CliSettings, Output
from cli.why_text import explanation_text
from kubeio.event_read import EventInfo, list_events
from kubeio.http import KubeHttp
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain import ExplainError, Explanation, PlacedPod, Target, explain

EVENTS_SHOWN = 10
"""How many of the newest events are shown."""


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


def event_item(event: EventInfo) -> dict[str, Any]:
    """One event as a user reads it."""
    return {
        "object": f"{event.kind} {event.object_key}",
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "count": event.count,
        "lastSeen": event.last_seen,
        "component": event.component,
    }


def document(target: Target, said: Explanation, events: Sequence[EventInfo]) -> dict[str, Any]:
    """The JSON and YAML document: what was asked, the explanation, the last events (oldest first)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Explanation",
        "target": {"kind": target.kind, "namespace": target.namespace, "name": target.name},
        **explanation_item(said),
        "events": [event_item(e) for e in events[-EVENTS_SHOWN:]],
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


def target_events(http: KubeHttp, target: Target, snapshot: ClusterSnapshot) -> list[EventInfo]:
    """The events of the namespace about ``target``'s objects (``about``), oldest first: one LIST."""
    wanted = about(target, snapshot)
    found = list_events(http, namespace=target.namespace)
    return [e for e in found if (e.kind, e.name) in wanted]


def render_why(target: Target, said: Explanation, events: Sequence[EventInfo], output: Output) -> str:
    """The explanation in ``output``'s form, ending with a newline: the same facts each way."""
    doc = document(target, said, events)
    if output is Output.JSON:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if output is Output.YAML:
        return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return explanation_text(doc)


@click.command("why")
@cluster_options(namespace=True)
@click.argument("target", metavar="NS/POD | POD | podgroup/NAME")
def command(settings: CliSettings, target: str) -> None:
    """Why a pod or a gang is pending (or where it runs): the cause, the queue, the nodes, the plan.

    TARGET is NAMESPACE/POD, POD (in -n NAMESPACE, else default) or podgroup/NAME (pg/NAME).
    """
    try:
        asked = Target.parse(target, settings.namespace or "default")
    except ExplainError as exc:
        raise click.UsageError(str(exc)) from exc
    http = connect(settings)
    found = read(http)
    try:
        said = explain(found.snapshot, asked, now=wall_clock())
    except ExplainError as exc:
        raise click.ClickException(str(exc)) from exc
    events = api_call(lambda: target_events(http, asked, found.snapshot))
    click.echo(render_why(asked, said, events, settings.output), nl=False)
