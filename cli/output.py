"""One report, three forms: a table for people, JSON and YAML for programs, all from the same items.

A command builds a :class:`Report`: its items (plain JSON values, already in their final order) and the
table rows derived from those items. So ``-o json`` never says more or less than the table: it says the
same thing in a form a program reads.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from cli.cli_settings import Output

API_VERSION = "phalanx.io/cli/v1"
"""The ``apiVersion`` of every JSON or YAML document the tool prints."""


@dataclass(frozen=True, slots=True)
class Report:
    """What a command found.

    Attributes:
        kind: the document's kind (``QueueList``, ``GangList``, ...).
        items: JSON-ready items, in their final (explicitly sorted) order.
        headers: the table's column headers.
        rows: the table's rows, derived from ``items`` (an item may give several rows).
    """

    kind: str
    items: Sequence[Mapping[str, Any]]
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]

    def document(self) -> dict[str, Any]:
        """The JSON and YAML document: apiVersion, kind and the items."""
        return {"apiVersion": API_VERSION, "kind": self.kind, "items": [dict(i) for i in self.items]}


def render(report: Report, output: Output) -> str:
    """``report`` as text in ``output``'s form, ending with a newline."""
    if output is Output.JSON:
        return json.dumps(report.document(), indent=2, ensure_ascii=False) + "\n"
    if output is Output.YAML:
        return yaml.safe_dump(report.document(), sort_keys=False, allow_unicode=True)
    return table_text(report)


def table_text(report: Report) -> str:
    """The report as a kubectl-style table: upper-case headers, columns apart, no borders, no colour.

    Like kubectl's, the lines are as long as their cells: nothing is cut or wrapped to fit a terminal, so
    a sentence (a gang's reason) reads whole and a program can split the columns.
    """
    if not report.rows:
        return "No resources found.\n"
    table = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 3, 0, 0), header_style="")
    for header in report.headers:
        table.add_column(header, no_wrap=True)
    for row in report.rows:
        table.add_row(*row)
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=100_000,
        color_system=None,
        markup=False,
        emoji=False,
        highlight=False,
        legacy_windows=False,
    )
    console.print(table)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())
