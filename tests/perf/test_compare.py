"""``hack/bench --compare``: two runs side by side, the same-run goals per run, and files it refuses."""

from __future__ import annotations

from pathlib import Path

import perf.__main__ as bench
import pytest
from perf.compare import NotABenchFileError, figure_rows, goal_rows, load, render_comparison

MINIMAL = '{"mode": "quick", "versions": {}, "sizes": []}'
"""The least a file must hold to be a run: a harness that failed before measuring anything writes this."""


def _rows(old: Path, new: Path) -> dict[str, list[str]]:
    return {row[0].strip(): row[1:] for row in figure_rows(load(old), load(new))}


def test_every_figure_of_either_run_is_lined_up_with_the_change_as_new_over_old(
    old_path: Path, new_path: Path
) -> None:
    rows = _rows(old_path, new_path)
    assert rows["1,000 nodes, baseline, backlog pods/s"] == ["400.0", "500.0", "1.25x"]
    assert rows["1,000 nodes, pods/s phalanx / baseline"] == ["0.75x", "0.90x", "1.20x"]
    assert rows["1,000 candidates, prioritize 4-GPU pod p99"] == ["2.40", "1.90", "0.79x"]
    assert rows["ClusterCache subprocess, 5,000 nodes / 150,000 pods, RSS"] == ["400", "-", "-"]


def test_a_figure_only_one_run_has_shows_a_dash_for_the_other(old_path: Path, new_path: Path) -> None:
    rows = _rows(old_path, new_path)
    assert rows["5,000 nodes, phalanx, backlog pods/s"] == ["-", "210.0", "-"]
    assert rows["10 queues, 1,000 pending groups"] == ["0.012", "-", "-"]
    assert rows["100 nodes, phalanx, paced p99 ms"] == ["150", "-", "-"]  # NaN in the new run: null


def test_figures_are_grouped_under_their_section_in_report_order(old_path: Path, new_path: Path) -> None:
    sections = [row[0] for row in figure_rows(load(old_path), load(new_path)) if not row[0].startswith(" ")]
    assert [s.split(" ")[0] for s in sections] == ["1.", "2.", "3.", "4.", "4b.", "5.", "6."]


def test_issue_13_goals_are_judged_for_each_run(old_path: Path, new_path: Path) -> None:
    goals = {row[0]: row[1:] for row in goal_rows(load(old_path), load(new_path))}
    assert goals == {
        "throughput with extender >= 0.8x baseline, 1,000 nodes": [
            "0.75x (300 vs 400 pods/s)",
            "MISSED",
            "0.90x (450 vs 500 pods/s)",
            "met",
        ],
        "throughput with extender >= 0.8x baseline, 5,000 nodes": [
            "not measured",
            "n/a",
            "0.70x (210 vs 300 pods/s)",
            "MISSED",
        ],
        "paced p50 with extender <= 2x baseline, 5,000 nodes": [
            "not measured",
            "n/a",
            "1.83x (110 vs 60 ms)",
            "met",
        ],
        "filter and prioritize p99 over HTTP <= 2 ms, 1,000 candidates": [
            "filter 1.80, prioritize 2.40 ms",
            "MISSED",
            "filter 1.20, prioritize 1.90 ms",
            "met",
        ],
        "filter and prioritize p99 over HTTP <= 5 ms, 5,000 candidates": [
            "not measured",
            "n/a",
            "filter 4.10, prioritize 6.30 ms",
            "MISSED",
        ],
        "256-pod gang <= 1.3x baseline's single pods, 5,000 nodes": [
            "not measured",
            "n/a",
            "gang 3.20 s; baseline for single pods not measured",
            "n/a",
        ],
        "extender RSS < 1 GiB, 5,000 nodes / 150,000 pods": [
            "300 MiB at 1,000 nodes / 10,000 pods only",
            "n/a",
            "700 MiB",
            "met",
        ],
        "per-call p50 at 150,000 pods <= 1.2x at a tenth of them": [
            "not measured",
            "n/a",
            "not measured",
            "n/a",
        ],
    }


@pytest.mark.parametrize("minimal_is", ["old", "new"])
def test_a_run_without_any_section_compares_as_dashes_and_n_a(
    tmp_path: Path, new_path: Path, minimal_is: str
) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text(MINIMAL)
    old, new = (empty, new_path) if minimal_is == "old" else (new_path, empty)
    column = 0 if minimal_is == "old" else 1
    rows = [r for r in figure_rows(load(old), load(new)) if r[0].startswith(" ")]
    assert rows
    assert all(r[1 + column] == "-" and r[3] == "-" for r in rows)
    goals = goal_rows(load(old), load(new))
    assert {g[2 + 2 * column] for g in goals} == {"n/a"}
    assert "Goals (issue 13)" in render_comparison(old, new)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "not JSON", id="not-json"),
        pytest.param("[1, 2]", "not a hack/bench result", id="a-list"),
        pytest.param('{"sizes": []}', "not a hack/bench result", id="no-versions"),
        pytest.param('{"versions": {}, "sizes": {}}', "not a hack/bench result", id="sizes-not-a-list"),
        pytest.param(None, "cannot read it", id="missing-file"),
    ],
)
def test_a_file_that_is_not_a_bench_json_is_refused_by_name(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(NotABenchFileError, match=message) as caught:
        load(path)
    assert str(caught.value).startswith(f"{path}: ")


def _no_run(*args: object, **kwargs: object) -> None:
    pytest.fail("--compare started a benchmark run")


def test_the_command_prints_the_comparison_and_starts_nothing(
    old_path: Path, new_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench, "versions", _no_run)
    monkeypatch.setattr(bench, "_cluster_sections", _no_run)
    monkeypatch.setattr(bench, "_offline_sections", _no_run)
    assert bench.main(["--compare", str(old_path), str(new_path)]) == 0
    out = capsys.readouterr().out
    assert f"old: {old_path}: quick run" in out
    assert f"new: {new_path}: full run" in out
    assert "Goals (issue 13)" in out


def test_the_command_exits_with_a_usage_error_on_a_bad_file(
    tmp_path: Path, new_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": "world"}')
    with pytest.raises(SystemExit) as exited:
        bench.main(["--compare", str(bad), str(new_path)])
    assert exited.value.code == 2
    assert f"error: {bad}: not a hack/bench result" in capsys.readouterr().err


def test_a_real_run_stopped_half_way_compares_with_what_it_measured(new_path: Path) -> None:
    # Written by a real `--quick --sections throughput` run, stopped by SIGTERM during 1,000 nodes:
    # the 100-node size is whole, the 1,000-node one has only its registration.
    interrupted = new_path.with_name("interrupted-quick.json")
    rows = _rows(interrupted, new_path)
    assert rows["100 nodes, phalanx, backlog pods/s"] == ["68.2", "150.0", "2.20x"]
    assert rows["100 nodes, pods/s phalanx / baseline"] == ["0.39x", "0.94x", "2.41x"]
    assert rows["1,000 nodes, phalanx, backlog pods/s"] == ["-", "450.0", "-"]
    assert {g[2] for g in goal_rows(load(interrupted), load(new_path))} == {"n/a"}
