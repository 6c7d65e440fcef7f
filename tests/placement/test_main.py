"""The placement manager's entry point: settings that cannot work stop it before it starts anything."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from placement.__main__ import main


def test_the_placement_manager_does_not_start_without_its_plan_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """It exits 2 with the reason before it talks to any API server (there is none here)."""
    monkeypatch.setattr(signal, "signal", lambda *_: None)  # keep pytest's own handlers
    argv = ["--gate-plan-on-pod", "true", "--plan-key-file", str(tmp_path / "absent")]
    assert main([*argv, "--kubeconfig", str(tmp_path / "no-kubeconfig")]) == 2
    assert f"python -m placement: plan key file {str(tmp_path / 'absent')!r} cannot be read" in (
        capsys.readouterr().err
    )
