"""A filter decision saved from the running extender replays offline to the same verdict and reasons."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import orjson
from localbed import Testbed
from workload import create_pod, create_podgroup, events_for, member, podgroup, wait_for

from scheduling.offline.replay import replay_filter
from scheduling.topology import TopologyCache
from tests.conftest import REPO


def _saved_decision(testbed: Testbed, pod: str) -> bytes | None:
    try:
        with urllib.request.urlopen(f"{testbed.extender_url}/debug/decision?pod={pod}", timeout=10) as reply:
            body: bytes = reply.read()
            return body
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def _replay(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "replay", str(path)],  # ``phalanx replay FILE``
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
    )


def test_a_gang_wait_saved_during_the_wait_replays_to_the_same_verdict(
    testbed: Testbed, namespace: str, tmp_path: Path, ungated: None
) -> None:
    """The extender's record of a gang's wait, replayed offline.

    Ungated (``ungated``): the extender saves the decisions it makes, on pods kube-scheduler asks it
    about; with gates on, a gang that cannot fit is kept gated and never asked about.
    """
    create_podgroup(testbed.http, namespace, podgroup("wide", 4))
    for i in range(4):
        create_pod(testbed.http, namespace, member(f"wide-{i}", "wide", 8))

    def waiting_event() -> str | None:
        for event in events_for(testbed.http, namespace, "wide-0"):
            if event["reason"] == "FailedScheduling" and "needs 32 GPUs" in event["message"]:
                return str(event["message"])
        return None

    event = wait_for("wide-0 turned down for its gang", waiting_event, timeout=60)
    saved = wait_for("a saved decision for wide-0", lambda: _saved_decision(testbed, f"{namespace}/wide-0"))
    file = tmp_path / "decision.json"
    file.write_bytes(saved)

    now, then = replay_filter(saved, TopologyCache())
    assert now == then
    assert then.feasible == []
    assert then.verdict is not None
    assert then.verdict.startswith(f"gang {namespace}/wide: needs 32 GPUs for 4 pods")
    assert then.verdict in event, "the saved verdict is the sentence kube-scheduler showed the user"
    assert set(then.rejected.values()) == {then.verdict}
    assert len(then.rejected) == 3

    same = _replay(file)
    print(same.stdout)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "replayed: the same decision" in same.stdout

    # The replay recomputes: the same file with members of 4 GPUs instead of 8 gives another answer.
    body = orjson.loads(saved)
    for pod in [body["pod"], *body["cluster"]["pods"]]:
        if pod["name"].startswith("wide-"):
            pod["requests"]["gpus"] = 4
    changed = tmp_path / "smaller-members.json"
    changed.write_bytes(orjson.dumps(body))
    different = _replay(changed)
    assert different.returncode == 1, different.stdout + different.stderr
    assert "a DIFFERENT decision" in different.stdout
