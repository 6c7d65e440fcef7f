"""The entry point without an API server: ``--print`` with a fake topology, and which NVML it picks."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from nodeagent.__main__ import load_topology, main, nvml_module
from nodeagent.agent_settings import AgentSettings
from nodeagent.fake_nvml import FakeNvml
from nodeagent.nvml_reader import NvmlTopologyReader
from scheduling.topology import from_json
from tests.scheduling.topology.shared_files import TOPOLOGIES

from .imported import MATRICES, SharedMatrix, document


@pytest.mark.parametrize("matrix", MATRICES[:3], ids=lambda m: m.name)
def test_print_reads_a_fake_topology(matrix: SharedMatrix, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--print", "--fake-topology", str(TOPOLOGIES / matrix.file), "--fake-gpu-model", matrix.model]
    assert main(argv, environ={}) == 0
    printed = from_json(capsys.readouterr().out.strip())
    assert printed == NvmlTopologyReader(FakeNvml(document(matrix.name))).read().document


def test_a_json_document_file_is_read_as_is(tmp_path: Path) -> None:
    doc = document("v100-cubemesh")
    path = tmp_path / "doc.json"
    path.write_text(doc.to_json() + "\n")
    assert load_topology(path, None) == doc


def test_print_without_a_driver_fails_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["--print"], environ={})
    if status == 1:
        assert "no topology" in capsys.readouterr().err
    else:  # a machine with a driver prints its topology
        assert from_json(capsys.readouterr().out.strip()).gpu_count >= 1


def test_the_real_module_is_used_without_a_fake_topology() -> None:
    assert nvml_module(AgentSettings(node_name="n")) is pynvml
