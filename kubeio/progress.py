"""How an elastic MPIJob tells phalanx its training speed, and where phalanx keeps what it learned.

**The report** (written by the job): the annotation ``phalanx.io/throughput`` on the pod the job's
reporting process runs in (its launcher or a worker; ``kubeio.mpijob_pods.report_on_pods``), JSON
``{"samplesPerSecond": 812.5, "workers": 4}``: the samples per second the job trains at now, and the
number of workers (``hvd.size()``) it measured that at. The process patches it every minute or so
(``docs/elastic-mpijobs.md`` shows it for elastic Horovod). Why an annotation: Horovod's elastic driver
and DeepSpeed expose no metrics endpoint of their own (DeepSpeed's throughput timer logs samples/s,
its monitor writes TensorBoard, W&B or CSV), so any form costs the job a few lines; an annotation
needs no route from the placement manager to the job's pods, and the placement manager already
watches every pod. Why on a pod and not on the MPIJob: the MPI Operator updates the MPIJob's status
with the version it read, so a write to the MPIJob landing during that update fails the operator's
sync, and the operator then waits 5 ms x 2^n (n: the job's events since its last successful sync)
before it tries the job again: minutes, seen on the test bed. A pod's report wakes the operator too
(it watches the job's pods), but nothing it writes conflicts with a pod's annotations, so its sync
succeeds and the backoff is reset. An MPIJob's own annotation is still read when none of its pods
carries a report. The worker count makes a report taken before a resize harmless: it is a sample of
the size it names.

**The samples** (written by phalanx): the annotation ``phalanx.io/throughput-samples``, JSON
``[[workers, nodes, samplesPerSecond], ...]``, one per size and spread the job has run at (the newest),
so a restarted placement manager fits the same model and decides the same.

A job that reports nothing is sized by the prior (linear scaling); a report that cannot be read is
ignored and said once on the job (``parse_report`` gives the reason).
"""

from __future__ import annotations

import json
import math

from scheduling.elastic.throughput import Sample

THROUGHPUT_ANNOTATION = "phalanx.io/throughput"
"""Pod annotation the job writes: ``{"samplesPerSecond": <number>, "workers": <whole number>}``."""

SAMPLES_ANNOTATION = "phalanx.io/throughput-samples"
"""MPIJob annotation the placement manager writes: ``[[workers, nodes, samplesPerSecond], ...]``."""

MAX_REPORT = 4096
"""Characters a report may have; a longer one is no report (and is kept clipped: ``clip_report``)."""

MAX_SAMPLES = 64
"""Samples kept per job at most (one per size and spread; the sizes nearest the newest win)."""


class ReportError(ValueError):
    """A throughput report that cannot be read; the message goes on the MPIJob's event."""


def parse_report(text: str | None) -> tuple[int, float] | None:
    """``(workers, samples per second)`` of a report, ``None`` when there is none.

    >>> parse_report('{"samplesPerSecond": 812.5, "workers": 4}')
    (4, 812.5)

    Raises:
        ReportError: the text is no report (not JSON, a field missing or not a positive number).
    """
    if text is None:
        return None
    try:
        raw = json.loads(text) if len(text) <= MAX_REPORT else None
    except (ValueError, RecursionError):
        raw = None
    if not isinstance(raw, dict):
        shape = '{"samplesPerSecond": <number>, "workers": <n>}'
        msg = f"annotation {THROUGHPUT_ANNOTATION} must be JSON {shape}"
        raise ReportError(msg)
    rate, workers = raw.get("samplesPerSecond"), raw.get("workers")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0:
        msg = f"annotation {THROUGHPUT_ANNOTATION}: samplesPerSecond must be a positive number, got {rate!r}"
        raise ReportError(msg)
    if isinstance(workers, bool) or not isinstance(workers, int) or not 0 < workers <= 1 << 20:
        msg = f"annotation {THROUGHPUT_ANNOTATION}: workers must be a positive whole number, got {workers!r}"
        raise ReportError(msg)
    return workers, float(rate)


def clip_report(text: str | None) -> str | None:
    """The report text a cache keeps of a pod: a text too long to be a report is clipped.

    The clipped text is still too long, so it is refused with the same reason, and a pod carrying
    256 KiB of annotation costs the cache no more than one carrying a report.

    >>> len(clip_report("x" * 10_000) or "")
    4097
    """
    return text if text is None or len(text) <= MAX_REPORT else text[: MAX_REPORT + 1]


def parse_samples(text: str | None) -> tuple[Sample, ...]:
    """The samples phalanx recorded; entries that are not ``[workers, nodes, rate]`` are dropped.

    >>> parse_samples('[[1,1,10.0],[4,1,32.5],["x"]]')
    (Sample(workers=1, nodes=1, rate=10.0), Sample(workers=4, nodes=1, rate=32.5))
    """
    try:
        raw = json.loads(text or "[]") if len(text or "") <= 65536 else []
    except (ValueError, RecursionError):
        return ()
    if not isinstance(raw, list):
        return ()
    out = []
    for entry in raw[:MAX_SAMPLES]:
        if not (isinstance(entry, list) and len(entry) == 3):
            continue
        k, n, x = entry
        whole = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (k, n))
        if whole and isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x > 0:
            out.append(Sample(int(k), int(n), float(x)))
    return tuple(sorted(out))


def render_samples(samples: tuple[Sample, ...]) -> str:
    """The samples annotation's text, compact and in order.

    >>> render_samples((Sample(4, 1, 32.5), Sample(1, 1, 10.0)))
    '[[1,1,10.0],[4,1,32.5]]'
    """
    return json.dumps([[s.workers, s.nodes, s.rate] for s in sorted(samples)], separators=(",", ":"))


def record(samples: tuple[Sample, ...], new: Sample) -> tuple[Sample, ...]:
    """``samples`` with ``new`` in place of any older sample of the same size and spread.

    >>> record((Sample(1, 1, 10.0), Sample(4, 1, 30.0)), Sample(4, 1, 32.0))
    (Sample(workers=1, nodes=1, rate=10.0), Sample(workers=4, nodes=1, rate=32.0))
    """
    kept = [s for s in samples if (s.workers, s.nodes) != (new.workers, new.nodes)]
    kept.sort(key=lambda s: (abs(s.workers - new.workers), s.workers, s.nodes))
    return tuple(sorted([new, *kept[: MAX_SAMPLES - 1]]))
