"""kubectl's flags and defaults: before or after the subcommand, $KUBECONFIG, ~/.kube/config, in-cluster."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.cli_settings import CliSettings, Flags, Output, default_kubeconfig, settings_from
from cli.options import cluster_options


def test_a_flag_after_the_subcommand_wins_over_one_before_it() -> None:
    before = Flags(kubeconfig="/before", context="ctx", namespace="ml", output="yaml")
    after = Flags(namespace="team", output="json")
    assert after.over(before) == Flags("/before", "ctx", "team", "json")


@pytest.mark.parametrize(
    ("environ", "has_home_config", "expected"),
    [
        ({"KUBECONFIG": "/etc/a:/etc/b"}, True, "/etc/a:/etc/b"),
        ({"KUBECONFIG": ""}, True, "HOME"),
        ({}, True, "HOME"),
        ({}, False, None),
    ],
    ids=["env", "empty-env", "home", "in-cluster"],
)
def test_the_default_kubeconfig_is_kubectls(
    tmp_path: Path, environ: dict[str, str], has_home_config: bool, expected: str | None
) -> None:
    if has_home_config:
        (tmp_path / ".kube").mkdir()
        (tmp_path / ".kube" / "config").write_text("apiVersion: v1\n")
    want = str(tmp_path / ".kube" / "config") if expected == "HOME" else expected
    assert default_kubeconfig(environ, tmp_path) == want


def test_settings_from_flags_and_defaults(tmp_path: Path) -> None:
    settings = settings_from(Flags(context="", namespace=""), environ={}, home=tmp_path)
    assert settings == CliSettings(kubeconfig=None, context=None, namespace=None, output=Output.TABLE)
    chosen = settings_from(Flags("/k", "c", "ml", "yaml"), environ={"KUBECONFIG": "/env"}, home=tmp_path)
    assert chosen == CliSettings("/k", "c", "ml", Output.YAML)
    with pytest.raises(ValueError, match="'xml' is not a valid Output"):
        settings_from(Flags(output="xml"), environ={}, home=tmp_path)


@click.group()
@click.option("-n", "--namespace", default=None)
@click.option("-o", "--output", default=None)
@click.pass_context
def group(ctx: click.Context, namespace: str | None, output: str | None) -> None:
    ctx.obj = Flags(namespace=namespace, output=output)


@group.command("show")
@cluster_options(namespace=True)
def show(settings: CliSettings) -> None:
    click.echo(f"{settings.kubeconfig} {settings.namespace} {settings.output.value}")


@group.command("plain")
@cluster_options(cluster=False)
def plain(settings: CliSettings) -> None:
    click.echo(f"{settings.namespace} {settings.output.value}")


def test_the_decorator_merges_the_groups_flags_with_the_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/from-env")
    runner = CliRunner()
    assert runner.invoke(group, ["-n", "ml", "-o", "yaml", "show"]).output == "/from-env ml yaml\n"
    assert runner.invoke(group, ["-n", "ml", "show", "-o", "json", "-n", "x"]).output == "/from-env x json\n"
    assert runner.invoke(group, ["show", "--kubeconfig", "/k"]).output == "/k None table\n"
    refused = runner.invoke(group, ["plain", "--kubeconfig", "/k"])
    assert refused.exit_code == 2 and "No such option '--kubeconfig'" in refused.output
    assert runner.invoke(group, ["-n", "ml", "plain"]).output == "ml table\n"
