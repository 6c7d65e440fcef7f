"""Reading settings from flags and the environment, shared by every entrypoint (style.md house rule 10).

The extender, the placement manager and the node agent are separate binaries that must not import each
other, yet they read numbers from the same kind of flags and variables. The readers live here, in the
adapter layer all three may import, so a malformed value fails the same way in each of them.
"""

from __future__ import annotations

import argparse


def positive_number(text: object) -> float:
    """Argparse type: a finite positive number (seconds, intervals)."""
    try:
        value = float(str(text))
    except ValueError:
        msg = f"{text!r} is not a number"
        raise argparse.ArgumentTypeError(msg) from None
    if not 0 < value < float("inf"):
        msg = f"{text!r} must be a positive number"
        raise argparse.ArgumentTypeError(msg)
    return value
