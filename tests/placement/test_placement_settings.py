from __future__ import annotations

from dataclasses import fields

import pytest

from placement.placement_settings import SETTINGS, PlacementSettings
from scheduling.admission.outcome import GateSettings
from scheduling.elastic import ElasticSettings


def test_defaults() -> None:
    assert PlacementSettings.parse([], {}) == PlacementSettings()


def test_an_empty_variable_counts_as_unset() -> None:
    environ = {"PHALANX_PLACEMENT_INTERVAL_SECONDS": "", "POD_NAMESPACE": ""}
    assert PlacementSettings.parse([], environ) == PlacementSettings()


def test_nested_settings_are_the_cores_own_filled_from_their_flags_and_variables() -> None:
    environ = {"PHALANX_GATE_RELEASE_TTL_SECONDS": "9", "PHALANX_ELASTIC_MOVES_PER_ROUND": "2"}
    argv = ["--gate-max-unbound-gpus", "16", "--elastic-cooldown-seconds", "5"]
    settings = PlacementSettings.parse(argv, environ)
    assert settings.gates == GateSettings(max_unbound_gpus=16, release_ttl=9.0)
    assert settings.elastic == ElasticSettings(moves_per_round=2, cooldown_seconds=5.0)


def test_every_field_is_declared_once_with_one_flag() -> None:
    declared = [s.field for s in SETTINGS]
    flags = [s.flag for s in SETTINGS]
    assert len(set(declared)) == len(declared) and len(set(flags)) == len(flags)
    top = {f.split(".")[0] for f in declared}
    assert top == {f.name for f in fields(PlacementSettings)}
    for nested, kind in (("gates", GateSettings), ("elastic", ElasticSettings)):
        inner = {f.partition(".")[2] for f in declared if f.startswith(nested + ".")}
        assert inner <= {f.name for f in fields(kind)}


def test_help_lists_every_flag_and_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        PlacementSettings.parse(["--help"], {})
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for setting in SETTINGS:
        assert setting.flag is not None and setting.flag in text
        assert all(env in text for env in setting.env)


def test_flags_win_over_the_environment_which_wins_over_defaults() -> None:
    environ = dict(
        KUBECONFIG="/env",
        PHALANX_PLACEMENT_INTERVAL_SECONDS="3",
        PHALANX_STALE_GANG_GRACE_SECONDS="30",
        PHALANX_PLACEMENT_METRICS_PORT="9090",
        PHALANX_LOG_LEVEL="DEBUG",
    )
    assert PlacementSettings.parse([], environ) == PlacementSettings(
        kubeconfig="/env",
        interval_seconds=3.0,
        stale_grace_seconds=30.0,
        metrics_port=9090,
        log_level="DEBUG",
    )
    argv = [
        "--kubeconfig",
        "/k",
        "--interval-seconds",
        "0.5",
        "--stale-grace-seconds",
        "7",
        "--metrics-port",
        "1",
    ]
    assert PlacementSettings.parse(argv, environ) == PlacementSettings(
        kubeconfig="/k", interval_seconds=0.5, stale_grace_seconds=7.0, metrics_port=1, log_level="DEBUG"
    )


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (["--interval-seconds", "0"], {}, "'0' must be a finite positive number"),
        (
            [],
            {"PHALANX_STALE_GANG_GRACE_SECONDS": "soon"},
            "(env var: 'PHALANX_STALE_GANG_GRACE_SECONDS'): 'soon' is not a number",
        ),
        ([], {"PHALANX_GATE_MAX_UNBOUND_GPUS": "0"}, "Invalid value for '--gate-max-unbound-gpus'"),
        ([], {"PHALANX_PLACEMENT_METRICS_PORT": "x"}, "Invalid value for '--metrics-port'"),
        ([], {"PHALANX_LEADER_ELECT": "maybe"}, "'maybe' is not a valid boolean"),
        (
            ["--lease-duration-seconds", "5", "--renew-deadline-seconds", "5"],
            {},
            "--renew-deadline-seconds must be above 0 and below --lease-duration-seconds",
        ),
        (
            ["--renew-deadline-seconds", "2", "--lease-retry-seconds", "2"],
            {},
            "--lease-retry-seconds must be below --renew-deadline-seconds",
        ),
        (
            ["--gate-plan-on-pod", "true"],
            {},
            "--gate-plan-on-pod needs --plan-key-file: the framework sidecar follows only sealed plans",
        ),
    ],
    ids=[
        "zero-interval",
        "bad-env-grace",
        "zero-gate-gpus",
        "bad-env-port",
        "bad-leader-elect",
        "deadline-not-below-duration",
        "retry-not-below-deadline",
        "plans-without-a-key",
    ],
)
def test_bad_settings_exit_with_usage(
    argv: list[str], environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        PlacementSettings.parse(argv, environ)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_leader_election_can_be_turned_off_and_its_lease_follows_the_pod_namespace() -> None:
    settings = PlacementSettings.parse(["--leader-elect", "false"], {"POD_NAMESPACE": "gpu-sched"})
    assert (settings.leader_elect, settings.lease_namespace) == (False, "gpu-sched")
    assert PlacementSettings.parse([], {"PHALANX_LEADER_ELECT": "TRUE"}).leader_elect is True


def test_internal_webhook_certificates_by_default_for_the_services_names() -> None:
    settings = PlacementSettings.parse([], {"POD_NAMESPACE": "sched"})
    assert (settings.webhook_certs, settings.webhook_namespace) == ("internal", "sched")
    assert settings.cert_names == (
        "phalanx-placement-webhook.sched.svc",
        "phalanx-placement-webhook.sched.svc.cluster.local",
    )
    assert settings.webhook_configurations == ("phalanx-pin-webhook", "phalanx-admission-gate")
    assert settings.serves_webhooks


def test_webhook_certificate_settings_from_flags_and_environment() -> None:
    environ = {
        "PHALANX_WEBHOOK_CERTS": "files",
        "PHALANX_WEBHOOK_CERT_NAMES": "127.0.0.1, webhook.example",
        "PHALANX_WEBHOOK_CONFIGURATIONS": "a,b,",
        "PHALANX_GATE_BYPASS_UNREADY_SECONDS": "30",
    }
    settings = PlacementSettings.parse(["--webhook-check-seconds", "1"], environ)
    assert settings.webhook_certs == "files"
    assert settings.cert_names == ("127.0.0.1", "webhook.example")
    assert settings.webhook_configurations == ("a", "b")
    assert (settings.webhook_check_seconds, settings.gate_bypass_unready_seconds) == (1.0, 30.0)
    assert not settings.serves_webhooks, "files without files: no webhook"
    with_files = PlacementSettings.parse(["--webhook-cert-file", "c", "--webhook-key-file", "k"], environ)
    assert with_files.serves_webhooks
    assert not PlacementSettings.parse(["--webhook-port", "0"], {}).serves_webhooks


def test_an_unknown_certificate_source_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        PlacementSettings.parse(["--webhook-certs", "cert-manager"], {})
    assert "'cert-manager' is not one of 'internal', 'files'" in capsys.readouterr().err


def test_the_elastic_grow_step_is_a_setting_of_at_least_one() -> None:
    assert PlacementSettings.parse([], {"PHALANX_ELASTIC_GROW_STEP": "4"}).elastic.grow_step == 4
    assert PlacementSettings.parse(["--elastic-grow-step", "8"], {}).elastic.grow_step == 8
    with pytest.raises(SystemExit):
        PlacementSettings.parse(["--elastic-grow-step", "0"], {})
