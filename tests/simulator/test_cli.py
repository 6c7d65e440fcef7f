"""``python -m simulator run``: the text and JSON reports, with the published figure beside ours."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
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


A6000 = Path(__file__).resolve().parents[2] / "simulator" / "data" / "topologies"
BRIDGED_A6000 = "rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt"


def test_philly_on_a_described_cluster_reports_the_nvlink_share(tmp_path: Path) -> None:
    """One A6000 node (queue a's quota); a-0 (1 GPU) and a-1 (2 GPUs, 600 s each) start at 60.

    FIFO puts a-1 on GPUs 1 and 2, across a bridge while 2-3 was free: 0 %, and 600 s of work at
    0.9537 take 630 s (``test_gpu_sets``), JCT 60 + 30 + 630. Phalanx gives it a bridged pair: 100 %.
    """
    trace = tmp_path / "jobs.csv"
    trace.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 00:00:00,600,1,600,a\n2017-10-09 00:00:00,600,2,1200,a\n"
    )
    quotas = tmp_path / "vc.csv"
    quotas.write_text("vc,node num\na,1\n")
    (tmp_path / BRIDGED_A6000).write_text((A6000 / BRIDGED_A6000).read_text())
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(
        f'[[group]]\nname = "a6000"\ntopology = "{BRIDGED_A6000}"\ngpu_model = "NVIDIA RTX A6000"\n'
    )
    args = ["philly", "--trace", str(trace), "--quotas", str(quotas), "--start", "2017-10-09 00:00:00"]
    args += ["--hours", "1", "--drain-hours", "1", "--scale", "1", "--policy", "fifo,phalanx"]
    result = CliRunner().invoke(main, [*args, "--cluster", str(cluster), "--json", "-"])
    assert result.exit_code == 0, result.output
    report = msgspec.json.decode(result.stdout.encode())
    assert {row["policy"]: row["nvlink_share"] for row in report["rows"]} == {"fifo": 0.0, "phalanx": 1.0}
    assert report["jct_s"]["fifo"] == {"a-0": 690, "a-1": 720}
    assert report["jct_s"]["phalanx"]["a-1"] == 690
    assert report["gpu_sets"]["fifo"]["a-1"] == [[60, [[0, [1, 2]]]]]


def test_philly_names_a_bad_cluster_file(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.toml"
    cluster.write_text("[[group]]\nname = 1\n")
    result = CliRunner().invoke(main, ["philly", "--cluster", str(cluster)])
    assert result.exit_code == 2
    assert f"{cluster}: field: Expected `str`, got `int` - at `$.group[0].name`" in result.output


@pytest.mark.parametrize(
    ("content", "said"),
    [
        pytest.param(
            "name,time,application\nx,1,bert\n", "field 'num_replicas': column missing", id="column"
        ),
        pytest.param(HEADER + "x,abc,bert,1,32\n", "field 'time': 'abc' is not a number", id="number"),
        pytest.param(HEADER + "x,1,nosuch,1,32\n", "unknown application 'nosuch'", id="application"),
        pytest.param(b"\xff\xfe\x00garbage", "not UTF-8 text", id="binary"),
    ],
)
def test_a_bad_workload_ends_in_a_cli_error_not_a_traceback(
    tmp_path: Path, content: str | bytes, said: str
) -> None:
    path = tmp_path / "workload-bad.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    result = CliRunner().invoke(main, ["run", "--workload", str(path), "--policy", "fifo"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and said in result.output, result.output
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit)


def test_a_bad_published_file_ends_in_a_cli_error(tmp_path: Path) -> None:
    published = tmp_path / "published.csv"
    published.write_text("policy,workload\ntiresias,workload-9\n")
    args = ["run", "--workload", str(_workload(tmp_path)), "--policy", "fifo", "--published", str(published)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "field 'relative_job_load': column missing from the header" in result.output


def test_a_seed_that_changes_nothing_is_said(tmp_path: Path) -> None:
    args = ["run", "--workload", str(_workload(tmp_path)), "--policy", "fifo,tiresias"]
    seeded = CliRunner().invoke(main, [*args, "--seed", "7"])
    plain = CliRunner().invoke(main, args)
    assert seeded.exit_code == 0, seeded.output
    assert "note: --seed 7 changes nothing here" in seeded.stderr
    assert "note:" not in plain.stderr
    assert seeded.stdout.replace("seed 7", "seed 0") == plain.stdout
