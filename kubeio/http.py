"""Raw JSON requests and watch streams against the API server.

The generated ``kubernetes`` models are slow to build and, for the Binding subresource, fail to decode
the ``Status`` the server returns (docs/design/extender-protocol.md §6). phalanx therefore uses the client
library only for what it does well, loading kubeconfig or in-cluster credentials and TLS settings, and sends
requests through its connection pool with orjson bodies, reading replies as plain dictionaries.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any, Protocol, cast
from urllib.parse import urlencode

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from kubeio.errors import KubeconfigError, KubeError, UnavailableError, error_for

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]


class JsonRequester(Protocol):
    """What readers and writers need of :class:`KubeHttp`: one JSON request (a fake in unit tests)."""

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> JsonObject:
        """Send one request and return the decoded JSON reply; raise ``KubeError`` on failure."""
        ...


def load_api_client(kubeconfig: str | None, *, pool_size: int = 64, context: str | None = None) -> Any:
    """Build a ``kubernetes`` ApiClient from a kubeconfig path, or in-cluster credentials if ``None``.

    Args:
        kubeconfig: path to a kubeconfig file (several joined by ``:`` are merged, as kubectl does);
            ``None`` means the pod's service account.
        pool_size: connections kept per host; binds of a large gang arrive at once.
        context: the kubeconfig context to use; ``None`` means its ``current-context``.

    Raises:
        KubeconfigError: the kubeconfig is missing or unreadable, names no such context, or (without
            one) the process does not run in a pod.
    """
    configuration = k8s_client.Configuration()
    try:
        if kubeconfig:
            k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=configuration
            )
        else:
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except (k8s_config.ConfigException, OSError, ValueError) as exc:
        where = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster configuration"
        msg = f"cannot use {where}: {exc}"
        raise KubeconfigError(msg) from exc
    configuration.connection_pool_maxsize = pool_size
    return k8s_client.ApiClient(configuration)


class KubeHttp:
    """JSON over HTTP to one API server, with the credentials of an ApiClient.

    Thread-safe: the underlying urllib3 pool is shared by all threads.
    """

    def __init__(self, api_client: Any, *, user_agent: str = "phalanx") -> None:
        self._api = api_client
        self._pool: urllib3.PoolManager = api_client.rest_client.pool_manager
        self._host: str = api_client.configuration.host.rstrip("/")
        self._user_agent = user_agent

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {"Accept": "application/json", "User-Agent": self._user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        self._api.update_params_for_auth(headers, [], ["BearerToken"], "", "GET", None)
        return headers

    def _url(self, path: str, query: Mapping[str, str] | None) -> str:
        url = self._host + path
        if query:
            url += "?" + urlencode(query)
        return url

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> JsonObject:
        """Send one request and return the decoded JSON reply.

        Raises:
            KubeError: a non-2xx reply (the most specific subclass) or a transport failure.
        """
        payload = None if body is None else orjson.dumps(body)
        try:
            response = self._pool.request(
                method,
                self._url(path, query),
                body=payload,
                headers=self._headers(content_type if payload is not None else None),
                timeout=urllib3.Timeout(total=timeout),
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise UnavailableError(0, "Unavailable", f"{method} {path}: {exc}") from exc
        data = response.data
        if not 200 <= response.status <= 299:
            raise _status_error(response.status, data)
        if not data:
            return {}
        try:
            return cast(JsonObject, orjson.loads(data))
        except orjson.JSONDecodeError as exc:
            raise KubeError(response.status, "BadReply", f"{method} {path}: reply is not JSON") from exc

    def watch(self, path: str, query: Mapping[str, str], *, timeout: float) -> Iterator[JsonObject]:
        """Yield the events of a watch stream until the server closes it.

        Raises:
            KubeError: the watch could not be opened, or the stream broke.
        """
        try:
            response = self._pool.request(
                "GET",
                self._url(path, {**query, "watch": "true"}),
                headers=self._headers(None),
                timeout=urllib3.Timeout(connect=10.0, read=timeout),
                preload_content=False,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise UnavailableError(0, "Unavailable", f"watch {path}: {exc}") from exc
        try:
            if response.status != 200:
                raise _status_error(response.status, response.read())
            buffer = b""
            for chunk in response.stream(65536):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield cast(JsonObject, orjson.loads(line))
        except (urllib3.exceptions.HTTPError, orjson.JSONDecodeError) as exc:
            raise UnavailableError(0, "Unavailable", f"watch {path} broke: {exc}") from exc
        finally:
            response.release_conn()


def _status_error(status: int, data: bytes) -> KubeError:
    reason, message = "", data[:500].decode("utf-8", "replace")
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict):
        reason = str(decoded.get("reason", ""))
        message = str(decoded.get("message", message))
    return error_for(status, reason, message)
