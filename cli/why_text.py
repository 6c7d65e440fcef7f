"""``phalanx why``'s table form: the verdict first, then the queue, the gang, the nodes, the plan, the events.

Made from the same JSON document as ``-o json`` (``cli.why_command.document``), so the text never says more or
less than the JSON; sections without content are left out. Sub-tables use the tool's kubectl layout
(``cli.output.table_text``), indented under their section.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cli.output import Report, table_text
from scheduling.resources import format_amount

INDENT = "  "

CAUSES = {
    "bound": "bound",
    "finished": "finished",
    "terminating": "being deleted",
    "not_phalanx": "not phalanx's",
    "fits_now": "fits now",
    "queue_limit": "held by its queue's limit",
    "non_preemptible_quota": "held: non-preemptible over its queue's quota",
    "held_for_ahead": "held for groups ahead in the fair order",
    "unknown_queue": "held: unknown queue",
    "no_podgroup": "waiting for its PodGroup",
    "gang_incomplete": "waiting for gang members",
    "excluded": "nodes with room are excluded",
    "too_large": "larger than any node",
    "fragmented": "free GPUs are fragmented",
    "no_capacity": "not enough free capacity",
}


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    text = table_text(Report("", [], headers, rows))
    return [INDENT + line for line in text.splitlines()]


def _gpus(gpus: Sequence[int]) -> str:
    return ",".join(str(g) for g in gpus) or "-"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _queue(queue: Mapping[str, Any]) -> list[str]:
    lines = ["QUEUE"]
    if queue["position"] is None:
        lines.append(f"{INDENT}{queue['name']}: not in the fair order")
    else:
        place = f"{_ordinal(queue['position'])} of {queue['pending']} waiting groups in the fair order"
        lines.append(
            f"{INDENT}{queue['name']}: {place} ({_ordinal(queue['inQueue'])} of its queue); "
            f"with it the queue is {queue['standing']}"
        )
    if queue["ahead"]:
        lines.append(f"{INDENT}first in line: {', '.join(queue['ahead'])}")
    for share in queue["shares"]:
        resource = share["resource"]
        limit = "none" if share["limit"] is None else format_amount(resource, share["limit"])
        figures = ", ".join(
            f"{label} {format_amount(resource, share[key])}"
            for label, key in (
                ("quota", "quota"),
                ("deserved", "deserved"),
                ("fair share", "fairShare"),
                ("allocated", "allocated"),
                ("this group asks", "requested"),
            )
        )
        name = "GPU" if resource == "nvidia.com/gpu" else resource
        lines.append(f"{INDENT}{name}: {figures}, limit {limit}")
    rule = queue["rule"] or "none"
    lines.append(f"{INDENT}rule: {rule}: {queue['sentence']}")
    lines.extend(f"{INDENT}invalid queues: {p}" for p in queue["problems"])
    return lines


def explanation_text(doc: Mapping[str, Any]) -> str:
    """The document as text for people, ending with a newline."""
    target = doc["target"]
    what = "gang" if target["kind"] == "podgroup" else "pod"
    lines = [f"{what} {target['namespace']}/{target['name']}: {CAUSES.get(doc['cause'], doc['cause'])}"]
    lines.append(f"{INDENT}{doc['verdict']}")
    if doc.get("admission"):
        lines.append(f"{INDENT}admission gate: {doc['admission']}")
    if doc["filterMessage"] and doc["filterMessage"] not in doc["verdict"]:
        lines.append(f"{INDENT}phalanx's filter says: {doc['filterMessage']}")
    if doc["queue"] is not None:
        lines += ["", *_queue(doc["queue"])]
    gang = doc["gang"]
    if gang is not None:
        pg = "" if gang["podGroup"] else " (no PodGroup)"
        lines += [
            "",
            "GANG",
            f"{INDENT}{gang['present']} pods of minMember {gang['minMember']}{pg}: "
            f"{gang['bound']} bound, {gang['waiting']} waiting",
        ]
    if doc["nodes"]:
        rows = [
            [str(g["count"]), g["message"].removeprefix("node(s) "), ", ".join(g["nodes"])]
            for g in doc["nodes"]
        ]
        lines += ["", "NODES", *_table(["COUNT", "REASON", "NODES"], rows)]
    if doc["bound"]:
        rows = [[p["pod"], p["node"], _gpus(p["gpus"])] for p in doc["bound"]]
        lines += ["", "BOUND", *_table(["POD", "NODE", "GPUS"], rows)]
    what_if = doc["whatIf"]
    if what_if is not None:
        when = "now"
        if what_if["finished"]:
            verb = "finishes" if len(what_if["finished"]) == 1 else "finish"
            when = f"once {', '.join(what_if['finished'])} {verb} ({what_if['freedGpus']} GPUs)"
        rows = [[p["pod"], p["node"], _gpus(p["gpus"])] for p in what_if["plan"]]
        lines += ["", f"PLAN {when}", *_table(["POD", "NODE", "GPUS"], rows)]
    if doc["events"]:
        rows = [
            [
                e["lastSeen"] or "-",
                e["object"],
                e["type"],
                e["reason"],
                f"{e['message']} (x{e['count']})" if e["count"] > 1 else e["message"],
            ]
            for e in doc["events"]
        ]
        lines += ["", "EVENTS", *_table(["LAST SEEN", "OBJECT", "TYPE", "REASON", "MESSAGE"], rows)]
    return "\n".join(lines) + "\n"
