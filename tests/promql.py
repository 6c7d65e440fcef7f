"""The PromQL of ``manifests/monitoring/``, the metric names it selects, the names a ``/metrics`` page offers.

Used by the unit test (against the registries) and the e2e test (real scrapes). Names are taken from the
syntax tree of ``promql_parser`` (Python binding of the Rust crate promql-parser, which also type-checks
function arguments), not from regexes: a selector's name is its metric name or its ``__name__`` matcher.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import promql_parser
import yaml

MONITORING = Path(__file__).resolve().parent.parent / "manifests" / "monitoring"
DASHBOARD = MONITORING / "phalanx-dashboard.json"
RULES = MONITORING / "phalanx-rules.yaml"

GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}
"""Grafana's built-in interval variables, which Grafana replaces before Prometheus sees a query."""

_SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
    "untyped": ("",),
    "unknown": ("",),
}


@dataclass(frozen=True, slots=True)
class Expression:
    """One PromQL expression and where it comes from (a dashboard panel or an alerting rule)."""

    where: str
    promql: str


def dashboard_expressions(dashboard: dict[str, Any]) -> list[Expression]:
    """Every target of every panel (rows' nested panels included), Grafana's intervals filled in."""
    found: list[Expression] = []
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            promql = target["expr"]
            for variable, value in GRAFANA_INTERVALS.items():
                promql = promql.replace(variable, value)
            found.append(Expression(f"panel {panel['title']!r} {target['refId']}", promql))
    return found


def rule_expressions(rules: dict[str, Any]) -> list[Expression]:
    """The ``expr`` of every alerting and recording rule."""
    return [
        Expression(f"rule {rule.get('alert') or rule.get('record')}", rule["expr"])
        for group in rules["groups"]
        for rule in group["rules"]
    ]


def shipped_expressions() -> list[Expression]:
    """The expressions of the shipped dashboard and rule file."""
    dashboard = json.loads(DASHBOARD.read_text())
    rules = yaml.safe_load(RULES.read_text())
    return dashboard_expressions(dashboard) + rule_expressions(rules)


def selected_names(promql: str) -> set[str]:
    """The metric names the selectors of ``promql`` read (raises ``ValueError`` when it does not parse)."""
    names: set[str] = set()

    def visit(node: promql_parser.Expr) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                names.add(node.name)
            names.update(m.value for m in node.matchers.matchers if m.name == "__name__")

    promql_parser.walk(promql_parser.parse(promql), visit)
    return names


_TYPE_LINE = re.compile(r"^# TYPE (\S+) (\S+)$")


def exposed_names(page: str) -> set[str]:
    """The sample names a text-format ``/metrics`` page offers, from its ``# TYPE`` lines.

    A labelled family has no samples until its first label set exists, but its TYPE line is there from the
    start; the type says which sample names it yields (a counter ``x_total``, a histogram ``x_bucket``,
    ``x_sum``, ``x_count``), so a query on ``x`` of a counter is refused as Prometheus would find nothing.
    """
    names: set[str] = set()
    for line in page.splitlines():
        match = _TYPE_LINE.match(line)
        if match is None:
            continue
        family, kind = match.groups()
        if kind == "counter":
            family = family.removesuffix("_total")
        names.update(family + suffix for suffix in _SAMPLE_SUFFIXES.get(kind, ("",)))
    return names
