"""What a failed end-to-end test leaves in its report: the state of its namespace and the components' logs.

CI keeps only what pytest prints. A test that times out waiting for a gang says "last: False" and
nothing of why; the pods' placement, the events phalanx wrote and the scheduler's lines about the
namespace are what a reader needs to tell a slow machine from a defect. Reading them must never turn
one failure into another, so every read here is guarded and reports its own error instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from localbed import Testbed
from workload import list_pods

LOGS = ("mpi-operator", "sim-kubelet", "extender", "placement", "kube-scheduler")
"""The components' logs (``Testbed.logs``) whose lines about the namespace are reported.

The report ends with the pods: a CI log is often read from its tail, so the most telling part is last.
"""

LINES_PER_LOG = 25
"""The newest lines kept from each log; older ones rarely say why a wait timed out."""

TROUBLE = re.compile(r"^[EW]\d{4} |\b(WARNING|ERROR|CRITICAL|Traceback)\b")
"""A klog error or warning line, or a Python logger's: kept whatever namespace it names (or none)."""


def describe(bed: Testbed, namespace: str) -> str:
    """The namespace's pods and events and the components' newest lines about it, as text."""
    parts = []
    for name in LOGS:
        path = bed.logs / f"{name}.log"
        parts.append(_guarded(path.name, partial(_log, path, namespace)))
    parts.append(_guarded("events", lambda: _events(bed, namespace)))
    parts.append(_guarded("pods", lambda: _pods(bed, namespace)))
    return "\n\n".join(parts)


def _guarded(title: str, read: Callable[[], str]) -> str:
    try:
        body = read()
    except Exception as error:  # a diagnosis must not raise over the test's own failure
        body = f"(could not read: {type(error).__name__}: {error})"
    return f"-- {title}\n{body}"


def _pods(bed: Testbed, namespace: str) -> str:
    rows = []
    for pod in sorted(list_pods(bed.http, namespace), key=lambda p: str(p["metadata"]["name"])):
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        annotations = meta.get("annotations") or {}
        phalanx = {k: v for k, v in sorted(annotations.items()) if k.startswith("phalanx.io/")}
        gates = [g["name"] for g in spec.get("schedulingGates") or []]
        conditions = [
            f"{c['type']}={c['status']}" + (f" ({c['message']})" if c.get("message") else "")
            for c in status.get("conditions") or []
        ]
        deleting = " deleting" if meta.get("deletionTimestamp") else ""
        rows.append(
            f"{meta['name']}: node={spec.get('nodeName', '-')} phase={status.get('phase', '-')}{deleting} "
            f"gates={gates} conditions={conditions} annotations={phalanx}"
        )
    return "\n".join(rows) or "(none)"


def _events(bed: Testbed, namespace: str) -> str:
    items = bed.http.request("GET", f"/api/v1/namespaces/{namespace}/events").get("items") or []
    ordered = sorted(items, key=lambda e: (str(_when(e)), str(e["metadata"]["name"])))
    return (
        "\n".join(
            f"{_when(e)} {e['involvedObject'].get('name')} {e.get('reason')} "
            f"x{e.get('count', 1)}: {e.get('message')}"
            for e in ordered
        )
        or "(none)"
    )


def _when(event: dict[str, Any]) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def _log(path: Path, namespace: str) -> str:
    if not path.exists():
        return "(no such log: the component was not started on this bed)"
    lines = path.read_text(errors="replace").splitlines()
    return "\n".join(_newest(lines, namespace)) or "(no line about it)"


def _newest(lines: Iterable[str], namespace: str) -> list[str]:
    """The newest lines that name the namespace (``e2e-1``, not ``e2e-14``) or report trouble.

    >>> _newest(['pod="e2e-1/a" bound', 'pod="e2e-14/b" bound', "E1128 10:00 lost", "I1128 ok"], "e2e-1")
    ['pod="e2e-1/a" bound', 'E1128 10:00 lost']
    """
    named = re.compile(rf"(?<![\w-]){re.escape(namespace)}(?![\w-])")
    about = [line for line in lines if named.search(line) or TROUBLE.search(line)]
    return about[-LINES_PER_LOG:]
