"""``python -m simulator run``: the text and JSON reports, with the published figure beside ours."""

from __future__ import annotations

from pathlib import Path

import msgspec
from click.testing import CliRunner

from simulator.__main__ import main
from simulator.report import PUBLISHED_FILE, Report

HEADER = "name,time,application,num_replicas,batch_size\n"


def _workload(tmp_path: Path) -> Path:
    path = tmp_path / "workload-9.csv"
    path.write_text(HEADER + "cifar10-0,107,cifar10,6,2048\nncf-1,135,ncf,1,32768\n")
    (tmp_path / PUBLISHED_FILE).write_text(
        "policy,relative_job_load,workload,avg_jct_s,num_jobs\ntiresias,1.0,workload-9,500.0,2\n"
    )
    return path


def test_text_report_puts_published_beside_ours(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--workload", str(_workload(tmp_path)), "--policy", "tiresias"])
    assert result.exit_code == 0, result.output
    # cifar10-0: 13 s to the decision at 120, 30 s restart, 910 s -> 953; ncf-1: 45 + 30 + 47 -> 122.
    assert "2 jobs   avg JCT 537.5 s" in result.output
    assert (
        "published (Pollux OSDI'21 artifact, tiresias, load 1.0): avg JCT 500.0 s   ratio 1.075"
        in result.output
    )


def test_json_report_is_the_same_twice(tmp_path: Path) -> None:
    args = ["run", "--workload", str(_workload(tmp_path)), "--seed", "7", "--json", "-"]
    first, second = CliRunner().invoke(main, args), CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    report = msgspec.json.decode(first.output, type=Report)
    assert report.jct_s == {"cifar10-0": 953, "ncf-1": 122}
    assert report.seed == 7
    assert report.ratio_to_published == 537.5 / 500.0


def test_json_file_and_no_published_figure(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    args = ["run", "--workload", str(_workload(tmp_path)), "--policy", "fifo", "--json", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "no published figure for fifo at load 1.0 on workload-9" in result.output
    assert msgspec.json.decode(out.read_bytes(), type=Report).published_avg_jct_s is None
