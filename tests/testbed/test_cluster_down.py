"""``hack/cluster down`` stops what the test bed started beside the control plane, not only the plane."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from localcluster import LocalCluster


def test_down_stops_a_process_recorded_beside_the_cluster(tmp_path: Path) -> None:
    """Found with ``hack/demo --keep``: down stopped the plane and orphaned the extender and kubelet."""
    (tmp_path / "pids").mkdir()
    cluster = LocalCluster(tmp_path, log=lambda line: None)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        cluster.record_process("testbed-extender", sleeper.pid)
        assert (tmp_path / "pids" / "testbed-extender.pid").exists()
        cluster.down()
        assert sleeper.wait(timeout=15) is not None, "down stopped it"
        assert not (tmp_path / "pids" / "testbed-extender.pid").exists()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
