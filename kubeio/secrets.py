"""One Secret, read and written with optimistic concurrency (the webhooks' certificates).

Every replica of the placement manager keeps the same certificates in one Secret, so writes must not
cross: a create that finds the Secret already there (409 AlreadyExists) or an update whose
``resourceVersion`` is stale (409 Conflict) tells the caller another replica wrote first, and the caller
reads the Secret again and takes what is there. Nothing is merged.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kubeio.errors import ConflictError, NotFoundError
from kubeio.http import JsonObject, JsonRequester


@dataclass(frozen=True, slots=True)
class StoredSecret:
    """A Secret as read: its decoded ``data`` and the object to write back.

    Attributes:
        namespace: its namespace.
        name: its name.
        data: ``data`` decoded (a value that is not base64 reads as empty).
        raw: the object as read (an update sends it back with new ``data``, under its resourceVersion).
    """

    namespace: str
    name: str
    data: Mapping[str, bytes]
    raw: JsonObject = field(compare=False, repr=False)


class SecretStore:
    """Reads, creates and updates Secrets by name (RBAC: get and update of the one Secret, by name)."""

    def __init__(self, http: JsonRequester, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    def read(self, namespace: str, name: str) -> StoredSecret | None:
        """The Secret, or ``None`` if it does not exist.

        Raises:
            KubeError: the API server failed or refused (e.g. forbidden).
        """
        try:
            raw = self._http.request("GET", _path(namespace, name), timeout=self._timeout)
        except NotFoundError:
            return None
        return StoredSecret(namespace, name, _decoded(raw.get("data")), raw)

    def create(self, namespace: str, name: str, data: Mapping[str, bytes], labels: Mapping[str, str]) -> bool:
        """Create the Secret (type ``Opaque``); ``False`` if it exists already (someone created it first).

        Raises:
            KubeError: the API server failed or refused otherwise.
        """
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "type": "Opaque",
            "data": _encoded(data),
        }
        try:
            path = f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets"
            self._http.request("POST", path, body=body, timeout=self._timeout)
        except ConflictError:
            return False
        return True

    def update(self, secret: StoredSecret, data: Mapping[str, bytes]) -> bool:
        """Replace the Secret's ``data``; ``False`` if it changed since ``secret`` was read (409).

        Raises:
            KubeError: the API server failed or refused otherwise (also when the Secret was deleted).
        """
        body: dict[str, Any] = {**secret.raw, "data": _encoded(data)}
        body.pop("stringData", None)
        try:
            self._http.request("PUT", _path(secret.namespace, secret.name), body=body, timeout=self._timeout)
        except ConflictError:
            return False
        return True


def _path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/secrets/{quote(name, safe='')}"


def _decoded(data: object) -> dict[str, bytes]:
    if not isinstance(data, dict):
        return {}
    decoded = {}
    for key, value in data.items():
        try:
            decoded[str(key)] = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
        except (binascii.Error, ValueError):
            decoded[str(key)] = b""
    return decoded


def _encoded(data: Mapping[str, bytes]) -> dict[str, str]:
    return {key: base64.b64encode(value).decode() for key, value in data.items()}
