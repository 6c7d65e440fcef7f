"""Kubernetes timestamps as numbers: one reading of ``metadata.creationTimestamp`` for the whole core.

Objects carry their creation time as RFC 3339 text (``Pod.created``), which sorts chronologically as it
is; rules that measure a wait (a gang still being created, a group starving, a release's age) need
seconds, and every one of them must read a malformed value the same way: as unknown, never as an error.
"""

from __future__ import annotations

from datetime import UTC, datetime


def seconds(created: str) -> float | None:
    """RFC 3339 text (``metadata.creationTimestamp``) in seconds since the epoch; ``None`` if unreadable.

    >>> seconds("2026-01-01T00:00:00Z"), seconds("")
    (1767225600.0, None)
    """
    try:
        return datetime.fromisoformat(created).timestamp()
    except ValueError:
        return None


def timestamp(at: float) -> str:
    """Seconds since the epoch as ``metadata.creationTimestamp`` writes them (RFC 3339, UTC, whole seconds).

    >>> timestamp(1767225600.0)
    '2026-01-01T00:00:00Z'
    """
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
