"""Where the placement manager keeps an elastic job's attained service: an annotation on its MPIJob.

``phalanx.io/attained-gpu-seconds``, JSON ``{"gpuSeconds": 7200.0, "at": 1764230000.0}``: the
GPU-seconds the job had run by ``at`` (seconds since the epoch). It is written in the elastic pass's
one write to the job (``kubeio.mpijobs.MpiJobWriter.update``) and read back each round, so a restarted
placement manager counts on from it (``scheduling.elastic.attained`` says how). A record that cannot be
read counts as none: the job's attained service is then its running workers' alone, as for a job never
written, and the next write replaces the record.
"""

from __future__ import annotations

import json
import math

from scheduling.elastic.attained import Attained

ATTAINED_ANNOTATION = "phalanx.io/attained-gpu-seconds"
"""MPIJob annotation the placement manager writes: ``{"gpuSeconds": <number>, "at": <seconds>}``."""


def parse_attained(text: str | None) -> Attained | None:
    """The record, or ``None`` for none and for text that is no record.

    >>> parse_attained('{"gpuSeconds": 7200.0, "at": 1764230000.0}')
    Attained(gpu_seconds=7200.0, at=1764230000.0)
    >>> parse_attained('{"gpuSeconds": -1, "at": 5}') is None
    True
    """
    try:
        raw = json.loads(text) if text is not None and len(text) <= 256 else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    values = raw.get("gpuSeconds"), raw.get("at")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values):
        return None
    gpu_seconds, at = float(values[0]), float(values[1])  # type: ignore[arg-type]
    return Attained(gpu_seconds, at) if gpu_seconds >= 0 and at >= 0 else None


def render_attained(record: Attained) -> str:
    """The annotation's text, compact (a tenth of a GPU-second, a millisecond).

    >>> render_attained(Attained(7200.04, 1764230000.0004))
    '{"at":1764230000.0,"gpuSeconds":7200.0}'
    """
    body = {"at": round(float(record.at), 3), "gpuSeconds": round(float(record.gpu_seconds), 1)}
    return json.dumps(body, sort_keys=True, separators=(",", ":"))
