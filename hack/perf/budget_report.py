"""The per-pod budget as a table (``perf.budget`` measures it): the baseline and phalanx's modes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from perf.report import num, table

WHICH = ("baseline", "phalanx", "phalanx-sidecar")
"""The columns, in this order; a scheduler the run did not budget has none."""


def _which(budgets: dict[str, Any]) -> tuple[str, ...]:
    return tuple(w for w in WHICH if w in budgets)


def _rows(budgets: dict[str, dict[str, Any]]) -> Iterator[tuple[str, dict[str, float | None]]]:
    columns = _which(budgets)

    def one(get: Any) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for which in columns:
            try:
                value = get(budgets.get(which) or {})
            except (KeyError, TypeError, AttributeError):
                value = None
            out[which] = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        return out

    def keys(*path: str) -> list[str]:
        seen: dict[str, None] = {}
        for which in columns:
            node: Any = budgets.get(which) or {}
            for step in path:
                node = node.get(step) if isinstance(node, dict) else None
            if isinstance(node, dict):
                seen.update(dict.fromkeys(node))
        return list(seen)

    yield "pods bound in the window", one(lambda b: b["pods"])
    yield "pods/s while profiled", one(lambda b: b["profiled_pods_per_second"])
    yield "wall ms per pod in the window", one(lambda b: b["wall_ms_per_pod"])
    yield "machine CPU ms per pod (all cores)", one(lambda b: b["machine_busy_ms_per_pod"])
    yield "machine idle share", one(lambda b: b["machine_idle_share"])
    for role in keys("cpu_ms_per_pod"):
        yield f"CPU: {role}", one(lambda b, r=role: b["cpu_ms_per_pod"][r])
    for part in keys("kube_scheduler_wall_ms_per_pod"):
        yield f"kube-scheduler wall: {part}", one(lambda b, p=part: b["kube_scheduler_wall_ms_per_pod"][p])
    for verb in keys("extender_routes"):
        yield (
            f"extender route {verb}: ms per call",
            one(lambda b, v=verb: b["extender_routes"][v]["ms_per_call"]),
        )
        yield (
            f"extender route {verb}: ms per pod",
            one(lambda b, v=verb: b["extender_routes"][v]["ms_per_pod"]),
        )
    for part in keys("kube_scheduler_profile", "parts_ms_per_pod"):
        yield (
            f"kube-scheduler CPU: {part}",
            one(lambda b, p=part: b["kube_scheduler_profile"]["parts_ms_per_pod"][p]),
        )
    for kind in keys("api_requests"):
        for figure in ("calls_per_pod", "ms_per_pod", "events_per_pod"):
            requests = [(budgets.get(c) or {}).get("api_requests") or {} for c in columns]
            if any(figure in r.get(kind, {}) for r in requests):
                yield (
                    f"API {kind}: {figure.replace('_per_pod', '').replace('_', ' ')}",
                    one(lambda b, k=kind, f=figure: b["api_requests"][k][f]),
                )
    yield "extender CPU holding the GIL", one(lambda b: b["extender_profile"]["gil_ms_per_pod"])
    for part in keys("extender_profile", "parts_ms_per_pod"):
        yield f"extender GIL: {part}", one(lambda b, p=part: b["extender_profile"]["parts_ms_per_pod"][p])
    yield "placement manager CPU holding the GIL", one(lambda b: b["placement_profile"]["gil_ms_per_pod"])
    for part in keys("placement_profile", "parts_ms_per_pod"):
        yield (
            f"placement GIL: {part}",
            one(lambda b, p=part: b["placement_profile"]["parts_ms_per_pod"][p]),
        )


def render_budget(results: dict[str, Any]) -> list[str]:
    """One table per node count that has a budget; empty when the run has none."""
    lines: list[str] = []
    for size in results.get("sizes") or []:
        budgets = size.get("budget") if isinstance(size, dict) else None
        if not isinstance(budgets, dict) or not budgets:
            continue
        lines.append(f"\nPer-pod budget at {size.get('nodes', 0):,} nodes (ms per bound pod unless named)")
        columns = _which(budgets)
        for which in columns:
            error = (budgets.get(which) or {}).get("error")
            if error:
                lines.append(f"  {which}: {error}")
        rows = [[label, *(num(v.get(w)) for w in columns)] for label, v in _rows(budgets)]
        lines += table(["", *columns], rows, text_first=True)
    return lines


def budget_figures(size: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """(label, value) of every budget figure at one size, for ``--compare``."""
    budgets = size.get("budget")
    if not isinstance(budgets, dict):
        return
    for label, values in _rows(budgets):
        for which in _which(budgets):
            value = values.get(which)
            if value is not None:
                yield f"{which}, {label}", value
