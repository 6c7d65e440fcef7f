"""The one error type of the topology package.

Topology documents arrive from outside the core (a node annotation written by the node agent, or text
pasted from ``nvidia-smi``), so malformed input is an expected event, not a bug. Every parser and
validator in this package raises :class:`TopologyError`, a :class:`ValueError`, with a message that
names the offending field or line, and the adapter can catch that one type.
"""

from __future__ import annotations


class TopologyError(ValueError):
    """A topology text or document is malformed, inconsistent or of an unsupported version."""
