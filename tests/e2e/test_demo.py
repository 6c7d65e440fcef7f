"""``hack/demo`` starts clean, and a port it cannot have is one line naming who holds it.

A ``--keep`` run leaves a control plane and the test bed's processes running in the demo's directory;
the next run used to delete that directory first, losing the pid files and orphaning seven processes.
The MPI Operator v0.7.0's health port (8080) is hard-coded, so a second operator on the machine used to
crash the demo with a traceback: the test bed now runs it in a network namespace of its own, and where
the machine allows none, the demo names the process holding the port and exits 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from pathlib import Path

import demo
import pytest
from demo import clear_previous
from localbed import Testbed, own_network_namespace
from localcluster.processes import alive, port_holder


def test_a_previous_run_is_stopped_before_its_directory_is_deleted(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    old = Testbed(directory, log=lambda line: None)
    try:
        old.start()  # as a --keep run leaves it: nothing stopped
        records = {p.stem: json.loads(p.read_text()) for p in (directory / "pids").glob("*.pid")}
        running = {name: r for name, r in records.items() if alive(r["pid"], r["start_time"])}
        assert {"etcd", "kube-apiserver", "testbed-extender", "testbed-placement"} <= set(running), records

        clear_previous(directory)

        survivors = {name: r["pid"] for name, r in running.items() if alive(r["pid"], r["start_time"])}
        assert not survivors, f"left running by the cleanup: {survivors}"
        assert not directory.exists()
    finally:
        old.stop()  # whatever the cleanup missed


def test_the_operator_starts_while_another_process_holds_its_port(operator: Testbed) -> None:
    """Port 8080 held (by this test, or by another test bed's operator): ours starts in its own network."""
    assert own_network_namespace(), "this machine allows network namespaces (root, or user namespaces)"
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        with contextlib.suppress(OSError):  # else someone else holds it, which is the same case
            listener.bind(("", 8080))
            listener.listen()
        assert port_holder(8080), "8080 is held"
        operator.stop_mpi_operator()
        operator.start_mpi_operator()  # raises unless it leads within a minute
        assert operator.is_running("mpi-operator")


def test_without_a_network_of_its_own_a_taken_port_is_one_line_naming_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where no namespace can be had, the demo names the process holding 8080 in one line and exits 2."""
    monkeypatch.setattr(demo, "own_network_namespace", lambda: ())
    monkeypatch.setattr(sys, "argv", ["hack/demo", "--dir", str(tmp_path / "demo"), "--only", "elastic"])
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket())
        try:
            listener.bind(("", 8080))
            listener.listen()
            holder = f"pid {os.getpid()} ("
        except OSError:  # another test bed's operator holds it: the line names that one
            holder = "pid "
        code = demo.main()
    said = capsys.readouterr().out.strip()
    print(said)
    assert code == 2, said
    assert len(said.splitlines()) == 1, said
    assert said.startswith(f"hack/demo: port 8080 is taken by {holder}"), said
    assert not (tmp_path / "demo").exists(), "nothing was started"
