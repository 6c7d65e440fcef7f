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

**Rotation.** The key file holds one key per line: the first seals, and a plan sealed under any of them
is believed (here and by the plugin). A key is replaced in three steps, each a Secret update and a
restart of both Deployments, so that no plan in flight is ever refused: add the new key as the second
line; then make it the first (the placement manager seals with it, the scheduler already believes it);
then, once the plans sealed under the old key are bound (minutes), drop the old line
(docs/admin-guide.md, "Rotating the plan key").
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
    """Seals plans under ``key`` and believes plans sealed under it or ``previous`` (``read_key``).

    The release pass writes what ``annotations`` returns.
    """

    key: bytes
    previous: tuple[bytes, ...] = ()
    """Keys a plan may still be sealed under while a rotation is under way; none seals."""

    def seal(self, pod: str, plan: str, at: float) -> str:
        """The seal of ``plan`` on ``pod`` ("namespace/name") written at ``at`` (wall-clock seconds).

        >>> PlanSeal(b"k" * 32).seal("ns/p", "n1:0,1", 1700000000.9)
        '1700000000.iWS4T7yIgOgHzvYvyglHQvqmHB3L5v5_Sv75T9x1T8U'
        """
        return _seal(self.key, pod, plan, int(at))

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
        when = int(at)
        believed = any(
            hmac.compare_digest(seal, _seal(key, pod, plan, when)) for key in (self.key, *self.previous)
        )
        return float(when) if believed else None

    def annotations(self, pod: str, node: str, gpus: tuple[int, ...], at: float) -> dict[str, str]:
        """The plan of ``pod`` ("namespace/name") on ``node`` with ``gpus`` and its seal: one write."""
        plan = format_plan(node, gpus)
        return {PLAN_ANNOTATION: plan, SEAL_ANNOTATION: self.seal(pod, plan, at)}


def _seal(key: bytes, pod: str, plan: str, when: int) -> str:
    """The seal of ``plan`` on ``pod`` at ``when`` under ``key`` (the module docstring's message)."""
    digest = hmac.new(key, f"{pod}\n{plan}\n{when}".encode(), hashlib.sha256).digest()
    return f"{when}.{base64.urlsafe_b64encode(digest).rstrip(b'=').decode()}"


def read_key(path: str) -> PlanSeal:
    """The seal of the keys in ``path``: one per line, surrounding whitespace and blank lines dropped.

    The first line seals; every line is believed (the module docstring's rotation). The plugin reads
    the file by the same rule.

    Raises:
        PlanKeyError: the file cannot be read, holds no key, or a key of fewer than ``MIN_KEY_BYTES`` bytes.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        msg = f"plan key file {path!r} cannot be read: {exc.strerror or exc}"
        raise PlanKeyError(msg) from exc
    keys = [line.strip() for line in raw.splitlines() if line.strip()]
    if not keys:
        msg = f"plan key file {path!r} holds no key (e.g. `openssl rand -base64 48` makes one)"
        raise PlanKeyError(msg)
    for number, key in enumerate(keys, start=1):
        if len(key) < MIN_KEY_BYTES:
            where = "" if len(keys) == 1 else f" on its line {number}"
            msg = (
                f"plan key file {path!r} holds {len(key)} bytes{where}; at least {MIN_KEY_BYTES} are needed "
                "(e.g. `openssl rand -base64 48`)"
            )
            raise PlanKeyError(msg)
    return PlanSeal(keys[0], tuple(keys[1:]))
