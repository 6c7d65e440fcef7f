"""``phalanx replay FILE``: the core's filter decision re-run offline, on a snapshot or a saved decision.

- A snapshot (``phalanx snapshot save``): for the named pending pod, or every pending phalanx pod sorted,
  the nodes that pass and the others grouped by reason, kube-scheduler's own first
  (``scheduling.offline.pending_filter`` says what is approximated and what a snapshot cannot hold).
- A decision the extender saved (``/debug/decision``): the decision re-run, shown then and now, and
  whether it came out the same (exit status 1 when not).

Exit status 2 when the file cannot be read or replayed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from cli.cli_settings import CliSettings
from cli.connection import ReplayFileError, replay_errors
from cli.options import cluster_options
from cli.output import Report, render
from scheduling.offline.pending_filter import PHALANX, PodReplay, group_reasons, replay_pending
from scheduling.offline.replay import DECISION, SavedAnswer, load_filter, replay_filter, saved_kind
from scheduling.offline.snapshot_file import load_snapshot
from scheduling.topology import TopologyCache


def _decision(replay: PodReplay) -> dict[str, Any]:
    return {
        "askedPhalanx": replay.asked_phalanx,
        "feasible": list(replay.feasible),
        "rejected": [
            {"source": r.source, "message": r.message, "nodes": list(r.nodes)} for r in replay.reasons
        ],
        "verdict": replay.verdict,
        "summary": replay.summary,
    }


def pod_item(replay: PodReplay) -> dict[str, Any]:
    """One pod's JSON item."""
    return {"pod": replay.pod, "group": replay.group, **_decision(replay)}


def from_answer(pod: str, group: str | None, answer: SavedAnswer) -> PodReplay:
    """A saved decision's answer in the replay's terms (phalanx's reasons: kube-scheduler's are not saved)."""
    rejected = {node: (message,) for node, message in answer.rejected.items()}
    return PodReplay(
        pod, group, True, tuple(sorted(answer.feasible)), group_reasons(PHALANX, rejected), answer.verdict
    )


def _rows(item: dict[str, Any]) -> list[list[str]]:
    """One row for the passing nodes, then one per reason: POD, NODES, WHY."""
    rows = [
        [
            item["pod"],
            ",".join(item["feasible"]) or "(none)",
            "pass" if item["feasible"] else "no node passes",
        ]
    ]
    if not item["askedPhalanx"]:
        rows[0][2] += "; kube-scheduler's own filters pass no node, so phalanx is not asked"
    for reason in item["rejected"]:
        nodes = reason["nodes"]
        rows.append(["", f"{len(nodes)}: {','.join(nodes)}", f"{reason['source']}: {reason['message']}"])
    if item["verdict"] is not None:
        rows.append(["", "", f"verdict: {item['verdict']}"])
    if item["summary"] is not None:
        rows.append(["", "", f"kube-scheduler would say: {item['summary']}"])
    return rows


def snapshot_report(replays: Sequence[PodReplay]) -> Report:
    """The report of replays on a snapshot."""
    items = [pod_item(r) for r in replays]
    return Report("ReplayList", items, ["POD", "NODES", "WHY"], [row for i in items for row in _rows(i)])


def decision_report(pod: str, group: str | None, now: SavedAnswer, then: SavedAnswer) -> Report:
    """A saved decision replayed: the item is the decision now, with the saved one and whether they match.

    The table reads in that order: the decision saved, then whether the replay gave the same
    one, and if not, the new one.
    """
    replayed, saved = from_answer(pod, group, now), from_answer(pod, group, then)
    item = {**pod_item(replayed), "saved": _decision(saved), "matches": now == then}
    rows = _rows({**item, **item["saved"]})
    rows[0][2] = f"saved: {rows[0][2]}"
    if now == then:
        rows.append(["", "", "replayed: the same decision"])
    else:
        rows.append(["", "", "replayed: a DIFFERENT decision:"])
        rows += [["", *row[1:]] for row in _rows(item)]
    return Report("ReplayList", [item], ["POD", "NODES", "WHY"], rows)


@click.command("replay")
@cluster_options(cluster=False)
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--pod", "pods", multiple=True, metavar="NS/NAME", help="only this pod (repeatable).")
@click.option(
    "--every-node",
    is_flag=True,
    help="offer phalanx every node, not only those kube-scheduler's own filters would pass.",
)
def command(settings: CliSettings, file: Path, pods: tuple[str, ...], every_node: bool) -> None:
    """Re-run phalanx's filter offline on FILE: a snapshot, or a decision the extender saved.

    On a snapshot: the nodes that pass for each pending phalanx pod and why the others do not. On a saved
    decision: the decision again, and whether it is the same (exit status 1 if not).
    """
    topologies = TopologyCache()
    with replay_errors():
        data = file.read_bytes()
        kind = saved_kind(data)
        if kind == DECISION:
            asked = load_filter(data, topologies)[0]
            if pods and set(pods) != {asked.pod.key}:
                msg = f"{file} holds the decision for {asked.pod.key} only"
                raise ReplayFileError(msg)
            now, then = replay_filter(data, topologies)
            report = decision_report(asked.pod.key, asked.pod.group_key, now, then)
        else:
            loaded = load_snapshot(data, topologies)
            try:
                replays = replay_pending(
                    loaded.snapshot,
                    now=loaded.taken,
                    settings=loaded.settings,
                    topologies=topologies,
                    pods=pods or None,
                    every_node=every_node,
                )
            except ValueError as exc:
                raise ReplayFileError(str(exc)) from exc
            report = snapshot_report(replays)
    click.echo(render(report, settings.output), nl=False)
    if kind == DECISION and not report.items[0]["matches"]:
        raise click.exceptions.Exit(1)
