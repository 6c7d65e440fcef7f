"""Taking phalanx's marks off the cluster before it is uninstalled: pin taints and admission gates.

Both are left on objects other components own. A pin taint keeps pods off a node for as long as it is
there; an admission gate keeps a pod out of every scheduler's queue for as long as it is there, and only
the placement manager removes it. ``python -m placement --remove-admission-gates --remove-pin-taints``
takes both off and exits (delete the webhook configurations first, so no new pod is gated meanwhile).
"""

from __future__ import annotations

import logging

from kubeio.convert import ConvertError, pod_from_api
from kubeio.errors import KubeError
from kubeio.gate_patches import GateWriter
from kubeio.http import KubeHttp
from kubeio.pins import PinWriter

log = logging.getLogger("placement")


def remove_admission_gates(http: KubeHttp) -> int:
    """Ungate every pod that carries the admission gate; the count goes to the log. 1 if one failed.

    Each pod gets the same guarded patch the release pass uses, so another gate of the pod stays.
    """
    released, failed = [], []
    for raw in http.request("GET", "/api/v1/pods").get("items") or []:
        try:
            pod = pod_from_api(raw)
        except ConvertError as exc:
            log.warning("pod skipped: %s", exc)
            continue
        if not pod.gated:
            continue
        try:
            if GateWriter(http).ungate(pod):
                released.append(pod.key)
                continue
        except KubeError as exc:
            log.warning("pod %s: admission gate not removed: %s", pod.key, exc)
        failed.append(pod.key)
    log.info("removed the admission gate from %d pod(s)", len(released))
    if failed:
        log.warning("still gated (changed meanwhile or refused; run again): %s", ", ".join(failed))
    return 1 if failed else 0


def remove_pin_taints(http: KubeHttp, effect: str) -> int:
    """Take the elastic pool's pin taint off every node; the count goes to the log. 1 if one failed."""
    pins = PinWriter(http, effect=effect)
    removed, failed = [], []
    for node in http.request("GET", "/api/v1/nodes").get("items") or []:
        name = node["metadata"]["name"]
        for attempt in range(3):  # a node changed meanwhile: read it again and retry
            try:
                if pins.taint_node(name, present=False):
                    removed.append(name)
                break
            except KubeError as exc:
                if attempt == 2:
                    log.warning("node %s: pin taint not removed: %s", name, exc)
                    failed.append(name)
    log.info("removed the pin taint from %d node(s): %s", len(removed), ", ".join(removed) or "none had it")
    return 1 if failed else 0
