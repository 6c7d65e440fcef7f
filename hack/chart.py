"""Render the Helm chart (``charts/phalanx``) with the Helm built from ``hack/helm``, and check it.

    hack/chart check                 # helm lint, then each mode's render against its kustomization
    hack/chart render [helm args]    # the chart's objects, CRDs included, on stdout

The chart and the kustomizations are two ways to install the same thing, so ``check`` fails (exit 1)
when the chart's default render and ``kubectl kustomize manifests/`` differ in any object, or its
render with ``scheduler.mode: sidecar`` and ``kubectl kustomize sidecar/`` do, and prints what
differs. Helm is built from its Go module, once, into the shared cache (``hack/localcluster``), so
the check runs the pinned release, not whatever ``helm`` a machine has.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from localcluster.build import CONTROL_PLANE, HELM, build_module

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "phalanx"
MANIFESTS = REPO / "manifests"
SIDECAR = REPO / "sidecar"
MODES: dict[str, tuple[Mapping[str, Any], Path]] = {
    "extender": ({}, MANIFESTS),
    "sidecar": ({"scheduler": {"mode": "sidecar"}}, SIDECAR),
}
"""Each mode: the values that select it, and the kustomization its render must equal."""
RELEASE = "phalanx"
NAMESPACE = "phalanx-system"

ObjectKey = tuple[str, str, str, str]
"""apiVersion, kind, namespace, name: what makes an object one object to the API server."""


class ChartError(RuntimeError):
    """Helm or kubectl failed; the message carries their output."""


def helm_binary() -> Path:
    """The pinned Helm CLI, built on first use."""
    return build_module(HELM, REPO / "hack" / HELM.directory) / "helm"


def _run(argv: Sequence[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        msg = f"{' '.join(argv[:3])} ... failed (exit {result.returncode}):\n{result.stderr or result.stdout}"
        raise ChartError(msg)
    return result.stdout


def render(values: Mapping[str, Any] | None = None, extra: Sequence[str] = ()) -> str:
    """``helm template`` of the chart with its CRDs, in phalanx-system, ``values`` laid over the defaults.

    Args:
        values: Values as a YAML document would give them (passed through a file, never ``--set``, so
            types are exactly these).
        extra: More ``helm template`` arguments.
    """
    argv = [str(helm_binary()), "template", RELEASE, str(CHART), "--include-crds", "--namespace", NAMESPACE]
    if not values:
        return _run([*argv, *extra])
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="values-") as file:
        yaml.safe_dump(dict(values), file)
        file.flush()
        return _run([*argv, "--values", file.name, *extra])


def lint() -> str:
    """``helm lint --strict`` of the chart (a warning fails too)."""
    return _run([str(helm_binary()), "lint", "--strict", str(CHART)])


def kustomize(directory: Path = MANIFESTS) -> str:
    """``kubectl kustomize directory`` with the control plane's own kubectl (what ``apply -k`` applies)."""
    kubectl = build_module(CONTROL_PLANE, REPO / "hack" / CONTROL_PLANE.directory) / "kubectl"
    return _run([str(kubectl), "kustomize", str(directory)])


def objects(text: str) -> dict[ObjectKey, dict[str, Any]]:
    """The objects of a multi-document YAML stream by key; two objects with one key are an error."""
    found: dict[ObjectKey, dict[str, Any]] = {}
    for document in yaml.safe_load_all(text):
        if not document:
            continue
        meta = document.get("metadata") or {}
        key = (document["apiVersion"], document["kind"], meta.get("namespace", ""), meta["name"])
        if key in found:
            msg = f"{'/'.join(key)} is rendered twice"
            raise ChartError(msg)
        found[key] = document
    return found


def differences(chart: Mapping[ObjectKey, Any], kustomization: Mapping[ObjectKey, Any]) -> list[str]:
    """What differs between two renders, object by object, as lines a person reads (empty: the same)."""
    lines = [f"only in the chart: {'/'.join(k)}" for k in sorted(chart.keys() - kustomization.keys())]
    lines += [f"only in manifests/: {'/'.join(k)}" for k in sorted(kustomization.keys() - chart.keys())]
    for key in sorted(chart.keys() & kustomization.keys()):
        if chart[key] != kustomization[key]:
            ours = yaml.safe_dump(kustomization[key], sort_keys=True).splitlines()
            theirs = yaml.safe_dump(chart[key], sort_keys=True).splitlines()
            diff = difflib.unified_diff(ours, theirs, "manifests/", "chart", lineterm="", n=2)
            lines += [f"differs: {'/'.join(key)}", *diff]
    return lines


def check() -> int:
    """Lint the chart, then compare each mode's render with its kustomization's; 0 when all agree."""
    print(lint().strip())
    failed = 0
    for mode, (values, directory) in MODES.items():
        chart, kustomization = objects(render(values)), objects(kustomize(directory))
        lines = differences(chart, kustomization)
        where = f"{directory.name}/"
        if lines:
            print("\n".join(lines))
            print(f"chart: the {mode} render and {where} differ ({len(lines)} lines above)")
            failed = 1
            continue
        print(
            f"chart: {mode} mode, {len(chart)} objects rendered by {helm_binary()}, "
            f"the same as kubectl kustomize {where}"
        )
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    """``check``, or ``render`` with any further arguments passed to ``helm template``."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["check"]:
            return check()
        if args[:1] == ["render"]:
            sys.stdout.write(render(extra=args[1:]))
            return 0
    except ChartError as exc:
        print(f"chart: {exc}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
