"""The Helm chart installed on the real control plane, then the demo's first chapter runs on it.

``helm template`` (the Helm of hack/helm) renders charts/phalanx with its default values; ``kubectl apply
--server-side`` applies every object it renders to a fresh test bed's API server: CRDs, namespace, RBAC,
ConfigMaps, Services, the Secret, Deployments, the DaemonSet and the viewer role. The two webhook
configurations alone are applied as a server-side dry run: applied for real they would make the API
server call the webhook Service's ClusterIP, a private address nothing serves on this machine, so the
test bed registers the same configurations calling the placement manager on loopback
(hack/bed_webhooks.py; tests/charts/test_chart.py proves the chart's are the manifests'). Then the
demo's first chapter (a 4-GPU trainer on a V100 cube mesh gets four GPUs all on NVLink) runs as
``hack/demo`` tells it.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from localbed import Testbed
from rich.console import Console
from workload import ensure_namespace

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from chart import objects, render
from demo import CUBE_MESH
from demo_story import NAMESPACE, Story, topology

from testbed.nodes import fleet, topology_from_file

DRY_RUN_KINDS = {"MutatingWebhookConfiguration"}


@pytest.fixture(scope="module")
def demo_bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A test bed as ``hack/demo`` starts it: 4 nodes of 8 V100 in a hybrid cube mesh."""
    bed = Testbed(Path(tmp_path_factory.mktemp("chart")), placement_grace=10.0)
    try:
        bed.start()
        bed.add_nodes(fleet(4, gpus=8, racks_per_zone=2, topology=topology_from_file(CUBE_MESH)))
        ensure_namespace(bed.http, NAMESPACE)
        yield bed
    finally:
        bed.stop()


def test_helm_template_applied_runs_the_demos_first_chapter(demo_bed: Testbed) -> None:
    rendered = render()
    found = objects(rendered)
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    real = [d for d in documents if d["kind"] not in DRY_RUN_KINDS]
    dry = [d for d in documents if d["kind"] in DRY_RUN_KINDS]
    assert len(real) + len(dry) == len(found) > 20

    applied = demo_bed.cluster.kubectl(
        "apply", "--server-side", "-f", "-", input=yaml.safe_dump_all(real), check=False
    )
    assert applied.returncode == 0, applied.stderr
    print(applied.stdout)
    checked = demo_bed.cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(dry), check=False
    )
    assert checked.returncode == 0, checked.stderr
    print(checked.stdout)

    for document in real:  # every object is there, as the API server stored it
        meta = document["metadata"]
        kind = f"{document['kind'].lower()}.{document['apiVersion'].split('/')[0]}"
        argv = ["get", kind.removesuffix(".v1"), meta["name"], "-o", "name"]
        if meta.get("namespace"):
            argv += ["-n", meta["namespace"]]
        assert demo_bed.cluster.kubectl(*argv, check=False).returncode == 0, (
            document["kind"] + " " + meta["name"]
        )
    out = io.StringIO()
    story = Story(demo_bed, Console(file=out, width=200, highlight=False, force_terminal=False), REPO)
    topology(story)
    told = out.getvalue()
    print(told)
    assert "notebook got GPU" in told
    chosen = next(line for line in told.splitlines() if "phalanx's choice" in line)
    assert "6 of 6" in chosen, told  # every pair of the trainer's four GPUs over NVLink
