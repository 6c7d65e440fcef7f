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
    ],
    ids=["zero-interval", "bad-env-grace", "empty-env-interval", "bad-env-port"],
)
def test_bad_settings_exit_with_usage(
    argv: list[str], environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        PlacementSettings.parse(argv, environ)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
