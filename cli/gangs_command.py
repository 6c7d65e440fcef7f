"""``phalanx gangs``: every PodGroup with its queue, phase, members bound against minMember, wait and reason.

State and wait are the core's (``scheduling.gang.gang_table``). Why a gang is not placed is not in the cluster
state but on its Events: phalanx's sentence on the PodGroup (``GangWaiting``, ``QueueHold``) and
kube-scheduler's ``FailedScheduling`` on each member, which quotes phalanx's sentence beside its own
counts. The reason shown is the newest of those, for a gang with fewer than ``minMember`` members bound
(for a placed gang an old event would only mislead).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import click

from cli.cli_settings import CliSettings
from cli.connection import connect, read, wall_clock
from cli.options import cluster_options
from cli.output import Report, render
from kubeio.errors import KubeError
from kubeio.event_read import EventInfo, list_events
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.gang.gang_table import GangRow, gang_rows

GANG_EVENTS = "involvedObject.kind=PodGroup,type=Warning"
"""The PodGroup events that say why a gang waits (phalanx's ``GangWaiting`` and ``QueueHold``)."""

MEMBER_EVENTS = "involvedObject.kind=Pod,reason=FailedScheduling"
"""The member events that say why a pod was not placed (kube-scheduler's)."""


def gang_reason(row: GangRow, members: Iterable[str], events: Iterable[EventInfo]) -> EventInfo | None:
    """The newest event saying why ``row``'s gang is not placed, or ``None`` when it is placed.

    Candidates are the PodGroup's own Warning events and its ``members``' (``namespace/name``)
    ``FailedScheduling`` events. On a tie the PodGroup's own event wins: it is phalanx's sentence alone.
    """
    if row.bound >= row.min_member:
        return None
    names = set(members)

    def about_gang(event: EventInfo) -> bool:
        if event.kind == "PodGroup":
            return event.object_key == row.key and event.type == "Warning"
        return event.kind == "Pod" and event.reason == "FailedScheduling" and event.object_key in names

    candidates = [e for e in events if about_gang(e)]
    return max(candidates, key=lambda e: (e.last_seen, e.kind == "PodGroup"), default=None)


def waited(seconds: float | None) -> str:
    """A wait as kubectl writes ages: ``45s``, ``3m20s``, ``2h5m``, ``3d4h``; ``-`` when not waiting.

    >>> [waited(s) for s in (None, 45.9, 200, 7500, 273600)]
    ['-', '45s', '3m20s', '2h5m', '3d4h']
    """
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s % 60 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m" if s % 3600 // 60 else f"{s // 3600}h"
    return f"{s // 86400}d{s % 86400 // 3600}h" if s % 86400 // 3600 else f"{s // 86400}d"


def gang_items(
    snapshot: ClusterSnapshot, now: float, events: Sequence[EventInfo], namespace: str | None
) -> list[dict[str, Any]]:
    """The JSON items, sorted by ``namespace/name``."""
    items = []
    for row in gang_rows(snapshot, now):
        if namespace is not None and row.namespace != namespace:
            continue
        members = [m.key for m in snapshot.members(row.key)]
        reason = gang_reason(row, members, events)
        items.append(
            {
                "namespace": row.namespace,
                "name": row.name,
                "queue": row.queue,
                "phase": row.phase,
                "members": row.members,
                "bound": row.bound,
                "minMember": row.min_member,
                "waitingSeconds": None if row.waiting_seconds is None else int(row.waiting_seconds),
                "scheduleTimeoutSeconds": row.timeout_seconds,
                "pastTimeout": row.past_timeout,
                "reason": None
                if reason is None
                else {
                    "object": f"{reason.kind} {reason.object_key}",
                    "reason": reason.reason,
                    "message": reason.message,
                    "lastSeen": reason.last_seen,
                },
            }
        )
    return items


def gang_table(items: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Headers and one row per gang."""
    headers = ["NAMESPACE", "NAME", "QUEUE", "PHASE", "BOUND/MIN", "MEMBERS", "WAITING", "REASON"]
    rows = [
        [
            item["namespace"],
            item["name"],
            item["queue"] or "-",
            item["phase"],
            f"{item['bound']}/{item['minMember']}",
            str(item["members"]),
            waited(item["waitingSeconds"]) + (" (past timeout)" if item["pastTimeout"] else ""),
            "-" if item["reason"] is None else f"{item['reason']['reason']}: {item['reason']['message']}",
        ]
        for item in items
    ]
    return headers, rows


def gangs_report(
    snapshot: ClusterSnapshot, now: float, events: Sequence[EventInfo], namespace: str | None
) -> Report:
    """The report of every gang of ``snapshot`` (of ``namespace`` only, if given) at ``now``."""
    items = gang_items(snapshot, now, events, namespace)
    headers, rows = gang_table(items)
    return Report("GangList", items, headers, rows)


@click.command("gangs")
@cluster_options(namespace=True)
def command(settings: CliSettings) -> None:
    """Every PodGroup: queue, phase, members bound / minMember, how long it waits, and why."""
    http = connect(settings)
    found = read(http)
    ns = settings.namespace

    try:
        events = list_events(http, namespace=ns, field_selector=GANG_EVENTS)
        events += list_events(http, namespace=ns, field_selector=MEMBER_EVENTS)
    except KubeError as exc:  # e.g. no RBAC for events: the state is still worth showing
        click.echo(f"warning: events cannot be listed, so no reasons are shown: {exc}", err=True)
        events = []
    report = gangs_report(found.snapshot, wall_clock(), events, ns)
    click.echo(render(report, settings.output), nl=False)
