"""The program itself: its console scripts, ``python -m cli``, and one-line errors instead of tracebacks."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest

from cli.program import app, main
from tests.conftest import REPO


def test_both_console_scripts_run_the_program() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"phalanx", "kubectl-phalanx"}, "kubectl finds plugins named kubectl-*"
    for target in scripts.values():
        module, _, name = target.partition(":")
        assert getattr(import_module(module), name) is main


def test_python_dash_m_cli_lists_every_subcommand() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = [line.split()[0] for line in done.stdout.split("Commands:")[1].splitlines() if line.strip()]
    assert listed == ["gangs", "nodes", "queues", "replay", "snapshot", "why"] == sorted(app.commands)


def test_a_missing_kubeconfig_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = main(["--kubeconfig", str(tmp_path / "none"), "queues"])
    err = capsys.readouterr().err
    assert status == 1
    assert f"cannot use kubeconfig {tmp_path / 'none'}" in err and "Traceback" not in err


def test_an_unreachable_api_server_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: here\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: here, context: {cluster: c, user: u}}]\n"
    )
    status = main(["nodes", "--kubeconfig", str(config)])
    err = capsys.readouterr().err
    assert status == 1
    assert "the API server said: GET /api/v1/nodes" in err and "Traceback" not in err
    status = main(["gangs", "--kubeconfig", str(config), "--context", "nowhere"])
    assert status == 1 and "nowhere" in capsys.readouterr().err


def test_a_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["queues", "-o", "xml"]) == 2
    assert "'xml' is not one of 'table', 'json', 'yaml'" in capsys.readouterr().err
