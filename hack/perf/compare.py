"""``hack/bench --compare OLD.json NEW.json``: two runs side by side, without starting anything.

A change to phalanx is judged by running the harness before and after it; reading two 60-line reports
against each other by eye misses what moved. This lines up every figure either run has
(``perf.figures``), prints the change as new / old, and judges the same-run goals (``perf.goals``) for
each run. A figure one run lacks (a ``--quick`` run has no 5,000 nodes, a ``--sections`` subset skips
sections) shows as "-". Only the two files are read: no cluster, no subprocess, no git.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from perf.figures import Figure, figures, in_report_order
from perf.goals import issue13
from perf.goals26 import issue26
from perf.report import num, table


class NotABenchFileError(Exception):
    """The file cannot be read, is not JSON, or is JSON that ``hack/bench --json`` did not write."""


def load(path: Path) -> dict[str, Any]:
    """The run in ``path``, checked to be a harness JSON (an object with ``versions`` and ``sizes``).

    Raises:
        NotABenchFileError: with a sentence naming the file and what is wrong with it.
    """
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        msg = f"{path}: cannot read it: {exc.strerror or exc}"
        raise NotABenchFileError(msg) from exc
    except orjson.JSONDecodeError as exc:
        msg = f"{path}: not JSON ({exc}); expected the JSON that hack/bench --json writes"
        raise NotABenchFileError(msg) from exc
    if not isinstance(data, dict) or not (
        isinstance(data.get("versions"), dict) and isinstance(data.get("sizes"), list)
    ):
        msg = f"{path}: not a hack/bench result (no 'versions' object and 'sizes' list at the top level)"
        raise NotABenchFileError(msg)
    return data


def _describe(name: str, path: Path, results: dict[str, Any]) -> str:
    v = results["versions"]
    return (
        f"  {name}: {path}: {results.get('mode', '?')} run started {results.get('started', '?')}, "
        f"commit {str(v.get('git_commit', '?'))[:12]}, kubernetes {v.get('kubernetes', '?')}, "
        f"python {v.get('python', '?')}, {v.get('cores', '?')} cores, {v.get('memory_gib', '?')} GiB, "
        f"took {num(results.get('duration_seconds'), '{:.0f} s')}"
    )


def _notes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What makes the two runs' absolute figures hard to compare; the same-run ratios still are."""
    notes: list[str] = []
    machine = ("cores", "memory_gib", "machine")
    if [old["versions"].get(k) for k in machine] != [new["versions"].get(k) for k in machine]:
        notes.append("the runs were on different machines: compare the phalanx / baseline ratios")
    if old.get("mode") != new.get("mode"):
        notes.append(f"a {old.get('mode')} run against a {new.get('mode')} run: pod counts differ")
    for name, run in (("old", old), ("new", new)):
        for change in run["versions"].get("uncommitted_product_changes") or []:
            notes.append(f"{name} measured an uncommitted change: {change}")
    return notes


def _change(old: Figure | None, new: Figure | None) -> str:
    if old is None or new is None or old.value == 0:
        return "-"
    return f"{new.value / old.value:.2f}x"


def figure_rows(old: dict[str, Any], new: dict[str, Any]) -> list[list[str]]:
    """(figure, old, new, new / old) for every figure either run has, under a row naming its section.

    A figure only one run has shows "-" for the other and no change.
    """
    before = {f.label: f for f in figures(old)}
    after = {f.label: f for f in figures(new)}
    every = in_report_order({**before, **{k: f for k, f in after.items() if k not in before}}.values())
    rows: list[list[str]] = []
    section = ""
    for f in every:
        if f.section != section:
            section = f.section
            rows.append([section, "", "", ""])
        a, b = before.get(f.label), after.get(f.label)
        rows.append([f"  {f.label}", a.text if a else "-", b.text if b else "-", _change(a, b)])
    return rows


def goal_rows(old: dict[str, Any], new: dict[str, Any], goals: Any = issue13) -> list[list[str]]:
    """(goal, old measured, old verdict, new measured, new verdict) for each goal of ``goals``.

    ``goals`` defaults to the same-run goals.
    """
    return [
        [a.label, a.measured, a.verdict, b.measured, b.verdict]
        for a, b in zip(goals(old), goals(new), strict=True)
    ]


def render_comparison(old_path: Path, new_path: Path) -> str:
    """The comparison as printed by ``--compare``.

    Raises:
        NotABenchFileError: either file is not a harness JSON.
    """
    old, new = load(old_path), load(new_path)
    lines = ["phalanx benchmark: two runs side by side", _describe("old", old_path, old)]
    lines += [_describe("new", new_path, new), ""]
    lines += table(["figure", "old", "new", "new / old"], figure_rows(old, new), text_first=True)
    lines += ["", "Goals (issue 13)"]
    lines += table(["goal", "old", "verdict", "new", "verdict"], goal_rows(old, new), text_first=True)
    lines += ["", "Goals (issue 26)"]
    lines += table(
        ["goal", "old", "verdict", "new", "verdict"], goal_rows(old, new, issue26), text_first=True
    )
    notes = _notes(old, new)
    if notes:
        lines += ["", "Notes"] + [f"  - {n}" for n in notes]
    return "\n".join(lines)
