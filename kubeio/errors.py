"""Errors of the Kubernetes adapter.

Callers above ``kubeio`` handle these and never the client library's exceptions
(docs/design/style.md §9), so the choice of HTTP library stays an implementation detail of this package.
"""

from __future__ import annotations


class KubeError(Exception):
    """A request to the API server failed.

    Attributes:
        status: the HTTP status, or 0 when no response arrived.
        reason: the ``reason`` of the API ``Status`` (``NotFound``, ``Conflict``, ...), if any.
        message: the API server's message, or a description of the transport failure.
    """

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if status else message)
        self.status = status
        self.reason = reason
        self.message = message


class NotFoundError(KubeError):
    """The object does not exist (404)."""


class ConflictError(KubeError):
    """The request conflicts with the object's current state (409): already bound, changed UID, ..."""


class GoneError(KubeError):
    """A watch or list continuation is too old (410); the caller must list again."""


class UnavailableError(KubeError):
    """No usable answer: connection refused, timeout, or a 5xx from the API server."""


class KubeconfigError(Exception):
    """No credentials to reach the API server: the kubeconfig or the in-cluster configuration is unusable."""


def error_for(status: int, reason: str, message: str) -> KubeError:
    """Return the most specific error type for an HTTP status."""
    if status == 404:
        return NotFoundError(status, reason, message)
    if status == 409:
        return ConflictError(status, reason, message)
    if status == 410:
        return GoneError(status, reason, message)
    if status == 0 or status >= 500:
        return UnavailableError(status, reason, message)
    return KubeError(status, reason, message)
