"""One report, three forms: the table, JSON and YAML say the same thing, in a stable layout."""

from __future__ import annotations

import json

import yaml

from cli.cli_settings import Output
from cli.output import API_VERSION, Report, render

REPORT = Report(
    "ThingList",
    [{"name": "alpha", "size": 8, "note": None}, {"name": "b", "size": 12, "note": "a long sentence, whole"}],
    ["NAME", "SIZE", "NOTE"],
    [["alpha", "8", "-"], ["b", "12", "a long sentence, whole"]],
)


def test_the_table_is_kubectls_layout() -> None:
    assert render(REPORT, Output.TABLE) == (
        "NAME    SIZE   NOTE\nalpha   8      -\nb       12     a long sentence, whole\n"
    )


def test_long_cells_are_neither_cut_nor_wrapped() -> None:
    sentence = "gang ml/big: needs 16 GPUs for 2 pods (8 per pod); " * 10
    text = render(Report("X", [], ["A", "WHY"], [["x", sentence.strip()]]), Output.TABLE)
    assert text.splitlines()[1] == "x   " + sentence.strip()


def test_json_and_yaml_carry_the_items_unchanged() -> None:
    expected = {"apiVersion": API_VERSION, "kind": "ThingList", "items": [dict(i) for i in REPORT.items]}
    assert json.loads(render(REPORT, Output.JSON)) == expected
    assert yaml.safe_load(render(REPORT, Output.YAML)) == expected
    assert list(json.loads(render(REPORT, Output.JSON))["items"][0]) == ["name", "size", "note"], (
        "key order kept"
    )


def test_an_empty_report() -> None:
    empty = Report("ThingList", [], ["NAME"], [])
    assert render(empty, Output.TABLE) == "No resources found.\n"
    assert json.loads(render(empty, Output.JSON))["items"] == []
