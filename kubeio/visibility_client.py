"""Asking the placement manager's visibility endpoint as the kubeconfig's user (``placement.visibility``).

The endpoint authorises each question with the caller's own bearer token (TokenReview and
SubjectAccessReview on the API server), so this client sends the token the kubeconfig holds (a
static token, a service-account token, or one an exec plugin such as an OIDC helper returns) to the
endpoint's URL, verifying its certificate against the CA the admin hands out (or the system's).
"""

from __future__ import annotations

from typing import Any, cast

import orjson
import urllib3

from kubeio.errors import KubeError, UnavailableError
from kubeio.http import JsonObject, load_api_client


class VisibilityClient:
    """GETs on one visibility endpoint with the bearer token of one kubeconfig context."""

    def __init__(self, api_client: Any, base_url: str, ca_file: str | None) -> None:
        self._api = api_client
        self._base = base_url.rstrip("/")
        self._pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=ca_file or None)

    @classmethod
    def connect(
        cls, kubeconfig: str | None, context: str | None, base_url: str, ca_file: str | None
    ) -> VisibilityClient:
        """A client for ``base_url`` with the credentials of ``kubeconfig``'s ``context``.

        Raises:
            KubeconfigError: the kubeconfig cannot be used.
        """
        return cls(load_api_client(kubeconfig, pool_size=1, context=context), base_url, ca_file)

    def _token(self) -> str:
        headers: dict[str, str] = {}
        self._api.update_params_for_auth(headers, [], ["BearerToken"], "", "GET", None)
        value = headers.get("authorization") or headers.get("Authorization") or ""
        return value.partition(" ")[2] if value.lower().startswith("bearer ") else ""

    def get(self, path: str, timeout: float = 30.0) -> JsonObject:
        """GET ``path`` with the bearer token and return the JSON answer.

        Raises:
            KubeError: no bearer token in the kubeconfig (status 0), or the endpoint refused (its status
                and its reason), or answered something that is not JSON.
            UnavailableError: the endpoint cannot be reached.
        """
        token = self._token()
        if not token:
            msg = (
                "the visibility endpoint needs a bearer token, and this kubeconfig's user has none "
                "(a client certificate is not forwarded)"
            )
            raise KubeError(0, "NoToken", msg)
        try:
            response = self._pool.request(
                "GET",
                self._base + path,
                headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
                timeout=urllib3.Timeout(total=timeout),
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise UnavailableError(0, "Unavailable", f"GET {self._base}{path}: {exc}") from exc
        text = response.data.decode("utf-8", "replace").strip()
        if response.status != 200:
            raise KubeError(response.status, response.reason or "Refused", text or "(no reason given)")
        try:
            return cast(JsonObject, orjson.loads(response.data))
        except orjson.JSONDecodeError as exc:
            raise KubeError(response.status, "BadReply", f"GET {path}: the answer is not JSON") from exc
