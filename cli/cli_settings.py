"""The command line's settings, read in one place (docs/design/style.md §10), as kubectl reads its own.

The flags mean what kubectl's mean, so ``kubectl phalanx`` behaves like any other kubectl command:
``--kubeconfig`` (else ``$KUBECONFIG``, else ``~/.kube/config`` when it exists, else the pod's service
account), ``--context``, ``-n/--namespace`` and ``-o/--output``. They may stand before the subcommand
(``phalanx -o json gangs``) or after it (``phalanx gangs -o json``); after it wins.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class Output(enum.StrEnum):
    """How a command prints what it found: the same data each way."""

    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


@dataclass(frozen=True, slots=True)
class Flags:
    """The global flags as typed, ``None`` where not given (before or after the subcommand)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    output: str | None = None

    def over(self, earlier: Flags) -> Flags:
        """These flags, each falling back to ``earlier``'s where not given."""
        return Flags(
            self.kubeconfig if self.kubeconfig is not None else earlier.kubeconfig,
            self.context if self.context is not None else earlier.context,
            self.namespace if self.namespace is not None else earlier.namespace,
            self.output if self.output is not None else earlier.output,
        )


@dataclass(frozen=True, slots=True)
class CliSettings:
    """Everything a command needs to know before it reads the cluster."""

    kubeconfig: str | None
    """The kubeconfig path (several joined by ``:`` are merged, as kubectl does); ``None``: the pod's
    service account (the tool runs in the cluster)."""

    context: str | None
    """The kubeconfig context; ``None``: its ``current-context``."""

    namespace: str | None
    """The namespace to show; ``None``: all of them (every team's gangs compete for the same GPUs, so
    unlike kubectl the tool shows all namespaces unless told otherwise)."""

    output: Output
    """``table`` for people, ``json`` or ``yaml`` for programs."""


def default_kubeconfig(environ: Mapping[str, str], home: Path) -> str | None:
    """The kubeconfig kubectl would use: ``$KUBECONFIG``, else ``~/.kube/config`` if it exists, else ``None``.

    >>> default_kubeconfig({"KUBECONFIG": "/a:/b"}, Path("/nonexistent"))
    '/a:/b'
    >>> default_kubeconfig({}, Path("/nonexistent")) is None
    True
    """
    if environ.get("KUBECONFIG"):
        return environ["KUBECONFIG"]
    path = home / ".kube" / "config"
    return str(path) if path.is_file() else None


def settings_from(flags: Flags, *, environ: Mapping[str, str], home: Path) -> CliSettings:
    """The settings of ``flags``, with kubectl's defaults for what they leave out.

    Raises:
        ValueError: ``--output`` is not one of table, json, yaml.

    >>> settings_from(Flags(output="json"), environ={"KUBECONFIG": "/k"}, home=Path("/nonexistent"))
    CliSettings(kubeconfig='/k', context=None, namespace=None, output=<Output.JSON: 'json'>)
    """
    return CliSettings(
        kubeconfig=flags.kubeconfig or default_kubeconfig(environ, home),
        context=flags.context or None,
        namespace=flags.namespace or None,
        output=Output(flags.output or Output.TABLE),
    )
