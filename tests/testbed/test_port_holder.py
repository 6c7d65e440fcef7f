"""The process holding a port is found from /proc, so a message can name it (``hack/demo``)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from localcluster.processes import port_holder


def test_the_listener_of_a_port_is_named_by_pid_and_command_line() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        found = port_holder(port)
    assert found is not None
    assert found.startswith(f"pid {os.getpid()} ("), found
    assert "\n" not in found
    assert Path(sys.executable).name in found or "pytest" in found


def test_a_port_nobody_listens_on_has_no_holder() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))  # bound, not listening
        port = sock.getsockname()[1]
        assert port_holder(port) is None
