"""The throughput table: a row for every scheduler the run measured, with its creation rate."""

from __future__ import annotations

from typing import Any

from perf.report import render, throughput_rows


def test_the_sidecar_gets_its_row_and_ratio_and_every_row_its_creation_rate(new_run: dict[str, Any]) -> None:
    size = new_run["sizes"][0]
    size["phalanx-sidecar"] = {
        **size["phalanx"],
        "pods_per_second": 2 * size["baseline"]["pods_per_second"],
        "burst_created_per_second": 102.5,
    }
    rows = {row[1]: row for row in throughput_rows(new_run) if row[0] == str(size["nodes"])}
    assert list(rows) == ["baseline", "phalanx", "phalanx-sidecar"]
    assert rows["phalanx-sidecar"][3:6] == ["102", f"{2 * size['baseline']['pods_per_second']:.1f}", "2.00x"]
    assert rows["baseline"][3] == f"{size['baseline']['burst_created_per_second']:.0f}"
    assert rows["baseline"][5] == "-"
    headers = [line.split()[:5] for line in render(new_run).splitlines() if line.strip().startswith("nodes")]
    assert ["nodes", "scheduler", "bound", "created/s", "pods/s"] in headers
