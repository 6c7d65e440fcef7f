"""``phalanx why NS/POD`` and ``phalanx why podgroup/NAME -n NS``: why it waits, in plain words.

The answer is the core's (``scheduling.explain``): the extender's own filter asked offline on one read of
the cluster, with kube-scheduler's own node filters first, so it says what the extender would say now.
Beside it, the last Events about the pod (and its PodGroup) or about the gang (and its members): what
kube-scheduler and phalanx actually told the user, and when.

A user who may not list pods in every namespace (403) is answered by the placement manager's visibility
endpoint instead (``--visibility-url``; ``placement.visibility``): the same document, computed by the same
core on its cache, other namespaces' groups unnamed, the events read here in the user's own namespace.

What one read cannot see: GPUs the extender promised to a bind in flight or reserved for a gang, which
live in its memory only; a gang being bound may therefore read as "fits now".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import click
import yaml

from cli.cli_settings import CliSettings, Output
from cli.connection import api_call, connect, read, wall_clock
from cli.options import cluster_options
from cli.output import API_VERSION
from cli.why_text import explanation_text
from kubeio.errors import KubeconfigError, KubeError
from kubeio.event_read import EventInfo, list_events
from kubeio.http import KubeHttp
from kubeio.visibility_client import VisibilityClient
from scheduling.cluster.snapshot import ClusterSnapshot
from scheduling.explain import ExplainError, Explanation, Target, explain
from scheduling.explain.explanation_json import about, explanation_item

EVENTS_SHOWN = 10
"""How many of the newest events are shown."""


def event_item(event: EventInfo) -> dict[str, Any]:
    """One event as a user reads it."""
    return {
        "object": f"{event.kind} {event.object_key}",
        "type": event.type,
        "reason": event.reason,
        "message": event.message,
        "count": event.count,
        "lastSeen": event.last_seen,
        "component": event.component,
    }


def document(target: Target, said: Explanation, events: Sequence[EventInfo]) -> dict[str, Any]:
    """The JSON and YAML document: what was asked, the explanation, the last events (oldest first)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "Explanation",
        "target": {"kind": target.kind, "namespace": target.namespace, "name": target.name},
        **explanation_item(said),
        "events": [event_item(e) for e in events[-EVENTS_SHOWN:]],
    }


def target_events(http: KubeHttp, target: Target, snapshot: ClusterSnapshot) -> list[EventInfo]:
    """The events of the namespace about ``target``'s objects (``about``), oldest first: one LIST."""
    wanted = about(target, snapshot)
    found = list_events(http, namespace=target.namespace)
    return [e for e in found if (e.kind, e.name) in wanted]


def render_why(target: Target, said: Explanation, events: Sequence[EventInfo], output: Output) -> str:
    """The explanation in ``output``'s form, ending with a newline: the same facts each way."""
    return render_document(document(target, said, events), output)


def render_document(doc: dict[str, Any], output: Output) -> str:
    """A ``document`` (computed here or by the visibility endpoint) in ``output``'s form."""
    if output is Output.JSON:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if output is Output.YAML:
        return str(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True))
    return explanation_text(doc)


def visibility_path(target: Target) -> str:
    """The visibility endpoint's path for ``target`` (``placement.visibility``).

    >>> visibility_path(Target("podgroup", "ml", "llama"))
    '/why/namespaces/ml/podgroups/llama'
    """
    resource = "podgroups" if target.kind == "podgroup" else "pods"
    return f"/why/namespaces/{quote(target.namespace, safe='')}/{resource}/{quote(target.name, safe='')}"


def ask_visibility(settings: CliSettings, target: Target, url: str, ca_file: str | None) -> dict[str, Any]:
    """The document for ``target`` from the placement manager, its events listed as the user.

    The endpoint answers what the admin's ``phalanx why`` answers, other namespaces' groups unnamed, and
    which objects' Events explain it; those are read here, in the target's namespace only, with the
    user's own credentials (none shown when the user may not list them, and stderr says so).

    Raises:
        click.ClickException: the endpoint refused (its reason) or cannot be reached.
    """
    try:
        client = VisibilityClient.connect(settings.kubeconfig, settings.context, url, ca_file)
        answer = client.get(visibility_path(target))
    except (KubeError, KubeconfigError) as exc:
        msg = f"the visibility endpoint {url} said: {exc}"
        raise click.ClickException(msg) from exc
    wanted = {(str(kind), str(name)) for kind, name in answer.pop("about", [])}
    try:
        found = list_events(connect(settings), namespace=target.namespace)
    except KubeError as exc:
        click.echo(f"warning: no events shown: {exc}", err=True)
        found = []
    events = [e for e in found if (e.kind, e.name) in wanted]
    return {**answer, "events": [event_item(e) for e in events[-EVENTS_SHOWN:]]}


def _forbidden(exc: click.ClickException) -> bool:
    cause = exc.__cause__
    return isinstance(cause, KubeError) and cause.status == HTTPStatus.FORBIDDEN


@click.command("why")
@cluster_options(namespace=True)
@click.option(
    "--visibility-url",
    envvar="PHALANX_VISIBILITY_URL",
    default=None,
    help="The placement manager's visibility endpoint (https://HOST:PORT), asked when you may not list "
    "pods in every namespace [env PHALANX_VISIBILITY_URL].",
)
@click.option(
    "--visibility-ca",
    envvar="PHALANX_VISIBILITY_CA",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="CA file that verifies the endpoint's certificate (default: the system's) "
    "[env PHALANX_VISIBILITY_CA].",
)
@click.argument("target", metavar="NS/POD | POD | podgroup/NAME")
def command(
    settings: CliSettings, target: str, visibility_url: str | None, visibility_ca: str | None
) -> None:
    """Why a pod or a gang is pending (or where it runs): the cause, the queue, the nodes, the plan.

    TARGET is NAMESPACE/POD, POD (in -n NAMESPACE, else default) or podgroup/NAME (pg/NAME). A user who
    may not list pods in every namespace is answered by the placement manager (--visibility-url), for
    what they may read, without other namespaces' workloads being named.
    """
    try:
        asked = Target.parse(target, settings.namespace or "default")
    except ExplainError as exc:
        raise click.UsageError(str(exc)) from exc
    http = connect(settings)
    try:
        found = read(http)
    except click.ClickException as exc:
        if not _forbidden(exc):
            raise
        if not visibility_url:
            msg = (
                f"{exc.message}\nYou may not read the whole cluster: ask the placement manager instead with "
                "--visibility-url (or PHALANX_VISIBILITY_URL): "
                "docs/user-guide.md#why-without-cluster-wide-access"
            )
            raise click.ClickException(msg) from exc
        doc = ask_visibility(settings, asked, visibility_url, visibility_ca)
        click.echo(render_document(doc, settings.output), nl=False)
        return
    try:
        said = explain(found.snapshot, asked, now=wall_clock())
    except ExplainError as exc:
        raise click.ClickException(str(exc)) from exc
    events = api_call(lambda: target_events(http, asked, found.snapshot))
    click.echo(render_why(asked, said, events, settings.output), nl=False)
