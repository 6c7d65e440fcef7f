"""Writing a pod's ``status.nominatedNodeName``: the node kube-scheduler tries first.

kube-scheduler v1.36 tries a pod's nominated node before any other (one Filter pass on one node, the
extender asked about that name alone), and since v1.35 (``NominatedNodeNameForExpectation``, beta,
KEP-5278) other components may set the field to say where a pod is expected to go. phalanx writes it for
a gang member whose reservation gives its node (``extender.nominator``) and for a pod the release pass
lets through with a place planned (``placement.release_pass``).
"""

from __future__ import annotations

from urllib.parse import quote

from kubeio.errors import KubeError, NotFoundError
from kubeio.http import KubeHttp
from kubeio.pins import JSON_PATCH


class NominationWriter:
    """Sets or clears ``status.nominatedNodeName`` with one guarded JSON patch on ``pods/status``."""

    def __init__(self, http: KubeHttp, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    def nominate(self, namespace: str, name: str, uid: str, node: str | None) -> bool:
        """Nominate ``node`` for the pod with ``uid`` (``None`` clears the nomination).

        The patch first tests the pod's UID, so a pod re-created under the same name is left alone.

        Returns:
            ``False`` when that pod is gone or was re-created; ``True`` once written.

        Raises:
            KubeError: the API server failed otherwise (unreachable, forbidden); the caller tries again.
        """
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": uid},
            {"op": "add", "path": "/status/nominatedNodeName", "value": node},
        ]
        path = f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/status"
        try:
            self._http.request("PATCH", path, body=patch, content_type=JSON_PATCH, timeout=self._timeout)
        except NotFoundError:
            return False
        except KubeError as exc:
            if exc.status == 422:  # the ``test`` failed: another pod of that name
                return False
            raise
        return True
