from __future__ import annotations

import pytest

from placement.settings import PlacementSettings


def test_defaults() -> None:
    assert PlacementSettings.parse([], {}) == PlacementSettings()


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
        (["--interval-seconds", "0"], {}, "argument --interval-seconds: '0' must be a positive number"),
        (
            [],
            {"PHALANX_STALE_GANG_GRACE_SECONDS": "soon"},
            "argument --stale-grace-seconds: 'soon' is not a number",
        ),
        ([], {"PHALANX_PLACEMENT_INTERVAL_SECONDS": ""}, "argument --interval-seconds: '' is not a number"),
        ([], {"PHALANX_PLACEMENT_METRICS_PORT": "x"}, "argument --metrics-port: invalid int value: 'x'"),
        (
            [],
            {"PHALANX_LEADER_ELECT": "maybe"},
            "argument --leader-elect: expected true or false, got 'maybe'",
        ),
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
    ],
    ids=[
        "zero-interval",
        "bad-env-grace",
        "empty-env-interval",
        "bad-env-port",
        "bad-leader-elect",
        "deadline-not-below-duration",
        "retry-not-below-deadline",
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


def test_the_elastic_grow_step_is_a_setting_of_at_least_one() -> None:
    assert PlacementSettings.parse([], {"PHALANX_ELASTIC_GROW_STEP": "4"}).elastic_grow_step == 4
    assert PlacementSettings.parse(["--elastic-grow-step", "8"], {}).elastic_grow_step == 8
    with pytest.raises(SystemExit):
        PlacementSettings.parse(["--elastic-grow-step", "0"], {})
