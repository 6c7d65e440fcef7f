"""The envelope's steady-CPU table: what each component costs while 15,000 or 150,000 pods sit still."""

from __future__ import annotations

from typing import Any

from perf.envelope import steady_cpu_table
from perf.report import render

ENVELOPE: dict[str, Any] = {
    "nodes": 5000,
    "pods": 150_000,
    "steady_cpu": {"placement manager": 1.5, "extender": 0.3, "kube-apiserver": 4.0},
    "first_stage": {"pods": 15_000, "steady_cpu": {"placement manager": 2.0, "extender": 0.5}},
}


def test_one_row_per_stage_sampled_with_a_column_per_role_and_zero_where_a_stage_lacks_one() -> None:
    headers, rows = steady_cpu_table(ENVELOPE)
    assert headers == ["pods", "extender", "kube-apiserver", "placement manager"]
    assert rows == [["15,000", "0.5", "0.0", "2.0"], ["150,000", "0.3", "4.0", "1.5"]]


def test_a_run_without_samples_has_no_table(new_run: dict[str, Any]) -> None:
    assert steady_cpu_table({"nodes": 5000, "pods": 150_000}) == (["pods"], [])
    assert "sit still" not in render(new_run)


def test_the_report_prints_the_table_under_the_per_call_figures(new_run: dict[str, Any]) -> None:
    new_run["memory"]["envelope"].update(ENVELOPE)
    text = render(new_run)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "sit still" in line)
    assert "placement manager" in lines[at + 1]
    assert lines[at + 3].split()[:2] == ["15,000", "0.5"]
    assert lines[at + 4].split()[:4] == ["150,000", "0.3", "4.0", "1.5"]
