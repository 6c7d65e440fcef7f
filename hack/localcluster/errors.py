"""How the local cluster reports: one exception for every failure, progress lines on stderr.

Callers (``hack/cluster``, the test bed, pytest fixtures) catch a single ``ClusterError`` whatever step
failed, and progress goes to stderr so the command line's stdout stays machine-readable
(``eval "$(hack/cluster up | tail -n1)"``).
"""

from __future__ import annotations

import sys


class ClusterError(RuntimeError):
    """Raised when the control plane cannot be built, started or stopped."""


def log_to_stderr(message: str) -> None:
    """Default progress sink: stderr, so stdout stays machine-readable for the CLI."""
    print(message, file=sys.stderr, flush=True)
