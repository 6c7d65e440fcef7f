"""The cluster description reader: what a good file gives, and the error each bad one gets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simulator.cluster_spec import ClusterSpecError, read_cluster

TOPOLOGIES = Path(__file__).resolve().parents[2] / "simulator" / "data" / "topologies"
A6000 = "rtx-a6000-8gpu-nvlink-bridge-pairs_unige-baobab-gpu048.txt"
PARTIAL = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "topologies"
    / "dgx-a100-8gpu-nv12_dcgm-issue-149.partial.txt"
)


def _write(tmp_path: Path, text: str) -> Path:
    shutil.copy(TOPOLOGIES / A6000, tmp_path / A6000)
    path = tmp_path / "cluster.toml"
    path.write_text(text)
    return path


def test_groups_fill_the_nodes_in_file_order(tmp_path: Path) -> None:
    """Two plain 8-GPU nodes, then A6000 nodes up to the 5 the workload needs: 3."""
    path = _write(
        tmp_path,
        f'rack_size = 2\n[[group]]\nname = "plain"\ncount = 2\ngpus = 8\n'
        f'[[group]]\nname = "a6000"\ntopology = "{A6000}"\ngpu_model = "NVIDIA RTX A6000"\n',
    )
    spec = read_cluster(path)
    assert (spec.rack_size, spec.network_mbs, spec.gpus_per_node) == (2, 12_000, 8)
    assert spec.node_count(5) == 5
    documents = spec.documents(5)
    assert documents[:2] == (None, None)
    a6000 = documents[2]
    assert a6000 is not None and documents[3:] == (a6000, a6000)
    assert a6000.link(0, 1) is not None and a6000.link(0, 1).kind == "NV4"  # type: ignore[union-attr]
    assert a6000.compute_capability == 86
    assert spec.groups[1].annotation is not None and spec.groups[1].annotation.startswith("{")


def test_counts_everywhere_decide_the_size(tmp_path: Path) -> None:
    spec = read_cluster(_write(tmp_path, '[[group]]\nname = "a"\ncount = 3\ngpus = 4\n'))
    assert spec.node_count(40) == 3


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            '[[group]]\nname = "a"\ngpus = \n', "TOML: Invalid value (at line 3, column 8)", id="toml"
        ),
        pytest.param('[[group]]\nname = "a"\ngpus = 8\ncolour = 1\n', "unknown field `colour`", id="unknown"),
        pytest.param('[[group]]\nname = "a"\ngpus = "8"\n', "Expected `int | null`, got `str`", id="type"),
        pytest.param("group = []\n", "at least one [[group]]", id="no-group"),
        pytest.param(
            '[[group]]\nname = "a"\n', "group[0] (a).gpus: needed when the group has no topology", id="gpus"
        ),
        pytest.param(
            '[[group]]\nname = "a"\ngpus = 8\n[[group]]\nname = "b"\ngpus = 8\n',
            "only one group may leave it out: ['a', 'b']",
            id="two-open",
        ),
        pytest.param(
            '[[group]]\nname = "a"\ncount = 0\ngpus = 8\n',
            "group[0] (a).count: must be at least 1",
            id="count",
        ),
        pytest.param(
            f'[[group]]\nname = "a"\ngpus = 4\ntopology = "{A6000}"\n',
            f"group[0] (a).gpus: 4 GPUs but {A6000} describes 8",
            id="gpus-vs-topology",
        ),
        pytest.param(
            '[[group]]\nname = "a"\ntopology = "missing.txt"\n', "missing.txt: No such file", id="missing"
        ),
        pytest.param(
            '[[group]]\nname = "a"\ntopology = "cluster.toml"\n',
            "no `nvidia-smi topo -m` header",
            id="not-topo",
        ),
        pytest.param(
            f'[[group]]\nname = "a"\ncount = 1\ngpus = 4\n[[group]]\nname = "b"\ntopology = "{A6000}"\n',
            "every group needs the same GPUs per node (the loop has one count): [4, 8]",
            id="mixed-gpus",
        ),
        pytest.param(
            'rack_size = -1\n[[group]]\nname = "a"\ngpus = 8\n', "rack_size: must be 0 or more", id="racks"
        ),
    ],
)
def test_bad_files_name_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ClusterSpecError) as caught:
        read_cluster(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert message in str(caught.value)


def test_a_partial_matrix_is_refused(tmp_path: Path) -> None:
    shutil.copy(PARTIAL, tmp_path / PARTIAL.name)
    path = _write(tmp_path, f'[[group]]\nname = "dgx"\ntopology = "{PARTIAL.name}"\n')
    with pytest.raises(ClusterSpecError, match="leaves GPU pairs unknown"):
        read_cluster(path)
