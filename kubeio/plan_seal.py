"""A pod's plan, sealed: only the holder of the plan key can write a plan the framework sidecar follows.

The framework sidecar's plugin (``sidecar/plan``) places a pod wherever its ``phalanx.io/plan`` says.
Anyone who may create or update their own pods can write an annotation, so a plan alone would let a
user pick a node and GPUs past the queues' order: on a pod created while the gate webhook is down
(``failurePolicy: Ignore``), or on one already released. So the placement manager seals each plan it
writes with an HMAC-SHA256 under a key that only it and the scheduler read (a Secret mounted in both),
and the plugin follows a plan only when its seal matches (docs/design/framework-sidecar.md, "Who may
write a plan").

The seal (``phalanx.io/plan-seal``) is ``<unix seconds>.<base64url HMAC>`` over the pod's namespace and
name, the plan's text and that time. The name binds it to the pod; the time lets the plugin refuse a
seal made before the pod was created (a seal copied from an earlier pod of the same name). The pod's
UID cannot be sealed: at the door the webhook seals a pod the API server has not given one yet.
``sidecar/plan/seal.go`` checks exactly this message: change both or neither.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubeio.convert import format_plan
from scheduling.model import PLAN_ANNOTATION

SEAL_ANNOTATION = "phalanx.io/plan-seal"
"""Pod annotation beside ``phalanx.io/plan``: the plan's seal, written in the same patch."""

MIN_KEY_BYTES = 32
"""A plan key shorter than this is refused: HMAC-SHA256's own block of strength."""


class PlanKeyError(ValueError):
    """The plan key file cannot be read or is too short; the message says which and what to do."""


@dataclass(frozen=True, slots=True)
class PlanSeal:
    """Seals plans under one key (``read_key``); the release pass writes what ``annotations`` returns."""

    key: bytes

    def seal(self, pod: str, plan: str, at: float) -> str:
        """The seal of ``plan`` on ``pod`` ("namespace/name") written at ``at`` (wall-clock seconds).

        >>> PlanSeal(b"k" * 32).seal("ns/p", "n1:0,1", 1700000000.9)
        '1700000000.iWS4T7yIgOgHzvYvyglHQvqmHB3L5v5_Sv75T9x1T8U'
        """
        when = int(at)
        message = f"{pod}\n{plan}\n{when}".encode()
        digest = hmac.new(self.key, message, hashlib.sha256).digest()
        return f"{when}.{base64.urlsafe_b64encode(digest).rstrip(b'=').decode()}"

    def sealed_at(self, pod: str, annotations: Mapping[str, str]) -> float | None:
        """When this key sealed the plan in ``annotations`` of ``pod`` ("namespace/name"), else ``None``.

        The creation-time window is the plugin's to check (``sidecar/plan/seal.go``): the release pass
        only needs to know that phalanx chose the plan, so that it keeps the GPUs a forged plan names
        for others and plans that pod itself, and when (``GateSettings.plan_refused_after``).
        """
        plan, seal = annotations.get(PLAN_ANNOTATION), annotations.get(SEAL_ANNOTATION)
        if not isinstance(plan, str) or not isinstance(seal, str):
            return None
        at, _, _ = seal.partition(".")
        if not at.isdigit() or at != str(int(at)):
            return None
        return float(at) if hmac.compare_digest(seal, self.seal(pod, plan, int(at))) else None

    def annotations(self, pod: str, node: str, gpus: tuple[int, ...], at: float) -> dict[str, str]:
        """The plan of ``pod`` ("namespace/name") on ``node`` with ``gpus`` and its seal: one write."""
        plan = format_plan(node, gpus)
        return {PLAN_ANNOTATION: plan, SEAL_ANNOTATION: self.seal(pod, plan, at)}


def read_key(path: str) -> PlanSeal:
    """The seal of the key in ``path`` (its bytes, surrounding whitespace dropped, as the plugin reads it).

    Raises:
        PlanKeyError: the file cannot be read, or holds fewer than ``MIN_KEY_BYTES`` bytes.
    """
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        msg = f"plan key file {path!r} cannot be read: {exc.strerror or exc}"
        raise PlanKeyError(msg) from exc
    if len(key) < MIN_KEY_BYTES:
        msg = (
            f"plan key file {path!r} holds {len(key)} bytes; at least {MIN_KEY_BYTES} are needed "
            "(e.g. `openssl rand -base64 48`)"
        )
        raise PlanKeyError(msg)
    return PlanSeal(key)
