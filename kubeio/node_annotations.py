"""Read one annotation of a Node and set it with a JSON merge patch.

The node agent owns exactly one annotation per node (``phalanx.io/gpu-topology``) while kubelet, the
node lifecycle controller and other agents write the rest of the Node concurrently. A JSON merge patch of
``metadata.annotations.<key>`` changes that one key and nothing else, so it needs no ``resourceVersion``
precondition: it cannot clobber another writer's fields, and a conflict retry loop would only add
traffic on the busiest object kind in the cluster. Errors are the adapter's own (``kubeio.errors``).
"""

from __future__ import annotations

from urllib.parse import quote

from kubeio.errors import KubeError
from kubeio.http import JsonObject, JsonRequester

MERGE_PATCH = "application/merge-patch+json"
"""Content type of a JSON merge patch (RFC 7386): objects merge key by key, ``null`` deletes a key."""


def node_path(node: str) -> str:
    """The API path of a Node.

    >>> node_path("gpu-node-1")
    '/api/v1/nodes/gpu-node-1'
    """
    return f"/api/v1/nodes/{quote(node, safe='')}"


def annotation_patch(key: str, value: str | None) -> JsonObject:
    """The merge patch that sets ``key`` to ``value`` (``None`` removes it) and touches nothing else.

    >>> annotation_patch("phalanx.io/gpu-topology", "{}")
    {'metadata': {'annotations': {'phalanx.io/gpu-topology': '{}'}}}
    """
    return {"metadata": {"annotations": {key: value}}}


class NodeAnnotations:
    """Reads and merge-patches single annotations of Nodes.

    Thread-safe as far as the underlying client is (``KubeHttp`` is).
    """

    def __init__(self, http: JsonRequester, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    def get(self, node: str, key: str) -> str | None:
        """The value of annotation ``key`` on ``node``, or ``None`` when the node does not carry it.

        Raises:
            NotFoundError: the node does not exist.
            KubeError: any other failure, or a reply whose annotation is not a string.
        """
        reply = self._http.request("GET", node_path(node), timeout=self._timeout)
        return _annotation(reply, node, key)

    def patch(self, node: str, key: str, value: str | None) -> str:
        """Set annotation ``key`` of ``node`` to ``value`` (``None`` removes it).

        The patch carries no ``resourceVersion``: it names one key, so concurrent writers of the Node's
        other fields are never overwritten (see the module docstring). Setting the value the node already
        has makes no new ``resourceVersion``: the API server skips writes that change nothing.

        Returns:
            The node's ``resourceVersion`` after the patch.

        Raises:
            NotFoundError: the node does not exist.
            KubeError: any other failure (403 without ``patch`` on nodes, 422 if the annotations grow
                past the API server's 256 KiB limit, 5xx or no answer as ``UnavailableError``), or a
                reply that does not show the value written.
        """
        reply = self._http.request(
            "PATCH",
            node_path(node),
            body=annotation_patch(key, value),
            content_type=MERGE_PATCH,
            timeout=self._timeout,
        )
        if _annotation(reply, node, key) != value:
            msg = f"PATCH node {node}: the reply does not show annotation {key} as written"
            raise KubeError(200, "BadReply", msg)
        version = (reply.get("metadata") or {}).get("resourceVersion")
        if not isinstance(version, str):
            msg = f"PATCH node {node}: the reply has no metadata.resourceVersion"
            raise KubeError(200, "BadReply", msg)
        return version


def _annotation(reply: JsonObject, node: str, key: str) -> str | None:
    metadata = reply.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        msg = f"node {node}: metadata.annotations is not an object"
        raise KubeError(200, "BadReply", msg)
    value = annotations.get(key)
    if value is not None and not isinstance(value, str):
        msg = f"node {node}: annotation {key} is not a string"
        raise KubeError(200, "BadReply", msg)
    return value
