"""The KubeSchedulerConfiguration a local kube-scheduler runs with, rendered from the project's own.

The local scheduler runs ``manifests/scheduler-config.yaml``, the file cluster admins apply, so the
end-to-end tests exercise the shipped configuration; only what must differ on loopback is edited.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from localcluster.errors import ClusterError

DEFAULT_EXTENDER_URL = "http://127.0.0.1:8888"
"""Where the scheduler looks for the extender unless told otherwise (matches the manifest)."""

KUBECONFIG_PLACEHOLDER = "KUBECONFIG_PATH"
"""Token in scheduler configs that stands for the scheduler's kubeconfig path."""


def render_scheduler_config(
    text: str, kubeconfig: Path, extender_url: str, *, extender_ca: Path | None = None
) -> str:
    """Turn the project's scheduler config into the one a local scheduler runs with.

    Three edits, done on the text because the standard library has no YAML parser:
    ``KUBECONFIG_PATH`` (or, without that placeholder, the value of the first ``kubeconfig:``
    key) becomes the scheduler's kubeconfig, every extender ``urlPrefix``
    becomes ``extender_url`` and leader election is switched off (a single local scheduler
    has nobody to elect against and would otherwise need a Lease and wait for it).

    With an ``https://`` ``extender_url`` and ``extender_ca``, each extender also gets
    ``enableHTTPS: true`` and a ``tlsConfig`` that verifies the extender against that CA (the
    ``tlsConfig`` shown in the manifest's comment, with ``caFile``).

    Args:
        text: The KubeSchedulerConfiguration YAML.
        kubeconfig: Path to put in ``clientConnection.kubeconfig``.
        extender_url: New ``urlPrefix`` for the extender(s).
        extender_ca: CA file that signed the extender's serving certificate (used with https only).

    Returns:
        The rendered YAML.

    Raises:
        ClusterError: If the config has neither the placeholder nor a ``kubeconfig:`` key.
    """
    quoted = json.dumps(str(kubeconfig))  # a JSON string is a valid YAML scalar
    # Only outside comments; the optional quotes around the placeholder are replaced too.
    text, count = re.subn(
        r"""^([^#\n]*?)(["']?)\bKUBECONFIG_PATH\b\2""",
        lambda m: m.group(1) + quoted,
        text,
        flags=re.MULTILINE,
    )
    if count == 0:  # no placeholder: take over the first `kubeconfig:` key (e.g. "" = in-cluster)
        text, count = re.subn(
            r"^([ \t]*kubeconfig:)[ \t]*.*$",
            lambda m: m.group(1) + " " + quoted,
            text,
            count=1,
            flags=re.MULTILINE,
        )
    if count == 0:
        msg = f"scheduler config has no {KUBECONFIG_PLACEHOLDER} placeholder"
        raise ClusterError(msg)
    text = re.sub(
        r"^([ \t]*(?:-[ \t]+)?urlPrefix:[ \t]*)\S+",
        lambda m: m.group(1) + extender_url,
        text,
        flags=re.MULTILINE,
    )
    if extender_ca is not None and extender_url.startswith("https://"):
        text = _verify_extender_tls(text, extender_ca)
    text, count = re.subn(
        r"^([ \t]*leaderElect:[ \t]*)\S+", lambda m: m.group(1) + "false", text, flags=re.MULTILINE
    )
    if count == 0:
        text, count = re.subn(
            r"^leaderElection:[ \t]*\n",
            "leaderElection:\n  leaderElect: false\n",
            text,
            count=1,
            flags=re.MULTILINE,
        )
    if count == 0:
        text = text.rstrip("\n") + "\nleaderElection:\n  leaderElect: false\n"
    return text


def _verify_extender_tls(text: str, ca_file: Path) -> str:
    """``enableHTTPS: true`` and, after each ``urlPrefix``, a ``tlsConfig`` trusting ``ca_file``.

    kube-scheduler's ``enableHTTPS`` without a CA would mean "do not verify" (its ``makeTransport``),
    so the CA is always given and ``insecure`` is false.
    """
    text = re.sub(r"^([ \t]*enableHTTPS:[ \t]*)\S+", r"\g<1>true", text, flags=re.MULTILINE)
    if re.search(r"^[ \t]*tlsConfig:", text, flags=re.MULTILINE):
        return text  # the config brings its own

    def add_tls(match: re.Match[str]) -> str:
        indent = " " * len(match.group(1))  # the keys of the extender's mapping start here
        return (
            f"{match.group(0)}\n{indent}tlsConfig:\n{indent}  insecure: false\n"
            f"{indent}  caFile: {json.dumps(str(ca_file))}"
        )

    return re.sub(r"^([ \t]*(?:-[ \t]+)?)urlPrefix:.*$", add_tls, text, flags=re.MULTILINE)
