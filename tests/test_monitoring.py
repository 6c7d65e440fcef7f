"""The dashboard and alerting rules of ``manifests/monitoring/`` parse and name metrics phalanx defines.

The names are checked here against the registries the extender and the placement manager build; the
e2e test (tests/e2e/test_monitoring.py) checks them against the real ``/metrics`` of both processes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from extender.extender_metrics import ExtenderMetrics, GangMetrics
from placement.placement_metrics import PlacementMetrics
from tests.promql import DASHBOARD, RULES, exposed_names, selected_names, shipped_expressions

EXPRESSIONS = shipped_expressions()


def defined_names() -> set[str]:
    extender, placement = CollectorRegistry(), CollectorRegistry()
    ExtenderMetrics.create(extender)
    GangMetrics.create(extender)
    PlacementMetrics.create(placement)
    return exposed_names(generate_latest(extender).decode()) | exposed_names(
        generate_latest(placement).decode()
    )


@pytest.mark.parametrize("expression", EXPRESSIONS, ids=[e.where for e in EXPRESSIONS])
def test_every_expression_parses_and_names_only_defined_metrics(expression: Any) -> None:
    names = selected_names(expression.promql)
    assert names, f"{expression.where} selects no metric: {expression.promql}"
    assert names <= defined_names(), f"{expression.where}: unknown {sorted(names - defined_names())}"


def test_the_dashboard_and_rules_cover_every_area_the_issue_lists() -> None:
    named = set().union(*(selected_names(e.promql) for e in EXPRESSIONS))
    for needed in (
        "phalanx_extender_request_duration_seconds_bucket",
        "phalanx_extender_requests_total",
        "phalanx_extender_binds_total",
        "phalanx_gang_oldest_wait_seconds",
        "phalanx_gangs_past_timeout",
        "phalanx_queue_gpus",
        "phalanx_node_gpus",
        "phalanx_gpu_partial_nodes",
        "phalanx_reclaims_total",
        "phalanx_stale_gang_evictions_total",
        "phalanx_elastic_actions_total",
        "phalanx_placement_leader",
        "phalanx_webhook_trusted",
        "phalanx_gate_bypassed_pods_total",
    ):
        assert needed in named, needed


def test_the_dashboard_reads_its_data_source_from_a_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert (dashboard["title"], dashboard["uid"]) == ("phalanx", "phalanx-scheduler")
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids are unique"
    for panel in panels:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


def test_every_alert_says_how_long_how_bad_and_what_happened() -> None:
    rules = yaml.safe_load(RULES.read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    assert {a["alert"] for a in alerts} >= {
        "PhalanxGangWaitingPastTimeout",
        "PhalanxQueueStarvedBelowQuota",
        "PhalanxExtenderErrors",
        "PhalanxPlacementNoLeader",
    }
    for alert in alerts:
        assert alert["for"], alert["alert"]
        assert alert["labels"]["severity"] in {"warning", "critical"}, alert["alert"]
        assert alert["annotations"]["summary"] and alert["annotations"]["description"], alert["alert"]


def test_a_counter_is_queried_with_its_total_suffix_and_a_histogram_by_its_series() -> None:
    registry = CollectorRegistry()
    ExtenderMetrics.create(registry)
    names = exposed_names(generate_latest(registry).decode())
    assert "phalanx_extender_requests_total" in names
    assert "phalanx_extender_requests" not in names
    assert {"phalanx_extender_request_duration_seconds_" + s for s in ("bucket", "sum", "count")} <= names
    assert "phalanx_extender_request_duration_seconds" not in names
    assert "phalanx_extender_open_promises" in names


def test_names_come_from_the_syntax_tree_and_broken_queries_are_refused() -> None:
    promql = 'sum(rate(a_total{x="b_total"}[5m])) / on() group_left max({__name__="c"}) or vector(0)'
    assert selected_names(promql) == {"a_total", "c"}
    with pytest.raises(ValueError, match="expected type matrix"):
        selected_names("rate(a_total)")
    with pytest.raises(ValueError):  # noqa: PT011 - the parser's messages are its own
        selected_names("sum(rate(a_total[5m])")
