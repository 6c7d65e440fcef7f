from __future__ import annotations

import re
from dataclasses import fields

import pytest

from extender.extender_settings import SETTINGS, ExtenderSettings
from kubeio.config import SettingsError


def test_unset_and_empty_variables_keep_the_defaults() -> None:
    assert ExtenderSettings.from_env({}) == ExtenderSettings()
    assert ExtenderSettings.from_env({"PHALANX_THREADS": "", "KUBECONFIG": ""}) == ExtenderSettings()


def test_every_variable_is_read() -> None:
    environ = {
        "KUBECONFIG": "/k",
        "PHALANX_BIND_ADDRESS": "0.0.0.0",
        "PHALANX_PORT": "9000",
        "PHALANX_METRICS_PORT": "9091",
        "PHALANX_THREADS": "8",
        "PHALANX_MAX_BODY_BYTES": "2048",
        "PHALANX_PROMISE_TTL_SECONDS": "1.5",
        "PHALANX_API_TIMEOUT_SECONDS": "2",
        "PHALANX_READY_TIMEOUT_SECONDS": "3",
        "PHALANX_RESERVATION_TTL_SECONDS": "4",
        "PHALANX_BIND_WAIT_SECONDS": "5",
        "PHALANX_GANG_BIND_DELAY_SECONDS": "0",
        "PHALANX_LOCALITY_KEYS": " rack , ,zone",
        "PHALANX_RECOVERY_INTERVAL_SECONDS": "6",
        "PHALANX_DUTY_WINDOW_SECONDS": "7",
        "PHALANX_LOG_LEVEL": "DEBUG",
        "PHALANX_TLS_CERT_FILE": "/tls/tls.crt",
        "PHALANX_TLS_KEY_FILE": "/tls/tls.key",
    }
    assert ExtenderSettings.from_env(environ) == ExtenderSettings(
        kubeconfig="/k",
        bind_address="0.0.0.0",
        port=9000,
        metrics_port=9091,
        threads=8,
        max_body_bytes=2048,
        promise_ttl_seconds=1.5,
        api_timeout_seconds=2.0,
        ready_timeout_seconds=3.0,
        reservation_ttl_seconds=4.0,
        bind_wait_seconds=5.0,
        gang_bind_delay_seconds=0.0,
        locality_keys=("rack", "zone"),
        recovery_interval_seconds=6.0,
        duty_window_seconds=7.0,
        log_level="DEBUG",
        tls_cert_file="/tls/tls.crt",
        tls_key_file="/tls/tls.key",
    )


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("PHALANX_PORT", "http", "PHALANX_PORT='http': 'http' is not a valid integer"),
        ("PHALANX_THREADS", "0", "PHALANX_THREADS='0': 0 is not in the range 1<=x<=4096"),
        (
            "PHALANX_METRICS_PORT",
            "70000",
            "PHALANX_METRICS_PORT='70000': 70000 is not in the range 0<=x<=65535",
        ),
        ("PHALANX_MAX_BODY_BYTES", "10", "PHALANX_MAX_BODY_BYTES='10': 10 is not in the range 1024<=x"),
        ("PHALANX_BIND_WAIT_SECONDS", "soon", "PHALANX_BIND_WAIT_SECONDS='soon': 'soon' is not a number"),
        (
            "PHALANX_PROMISE_TTL_SECONDS",
            "0",
            "PHALANX_PROMISE_TTL_SECONDS='0': '0' must be a finite positive number",
        ),
        ("PHALANX_API_TIMEOUT_SECONDS", "nan", "PHALANX_API_TIMEOUT_SECONDS='nan': 'nan' must be a finite"),
        (
            "PHALANX_READY_TIMEOUT_SECONDS",
            "inf",
            "PHALANX_READY_TIMEOUT_SECONDS='inf': 'inf' must be a finite",
        ),
        (
            "PHALANX_GANG_BIND_DELAY_SECONDS",
            "-1",
            "PHALANX_GANG_BIND_DELAY_SECONDS='-1': '-1' must be a finite",
        ),
        ("PHALANX_LOG_LEVEL", "chatty", "PHALANX_LOG_LEVEL='chatty': 'chatty' is not one of"),
    ],
    ids=[
        "not-an-int",
        "int-below",
        "port-above",
        "int-too-small",
        "not-a-number",
        "zero",
        "nan",
        "inf",
        "negative-delay",
        "bad-log-level",
    ],
)
def test_a_bad_value_names_the_variable_and_the_value(name: str, value: str, message: str) -> None:
    with pytest.raises(SettingsError, match="^" + re.escape(message)):
        ExtenderSettings.from_env({name: value})


def test_plain_http_is_the_default_and_tls_needs_both_files() -> None:
    assert not ExtenderSettings.from_env({}).serves_tls
    both = {"PHALANX_TLS_CERT_FILE": "/c", "PHALANX_TLS_KEY_FILE": "/k"}
    assert ExtenderSettings.from_env(both).serves_tls
    for name in both:
        with pytest.raises(SettingsError, match="must be set together"):
            ExtenderSettings.from_env({name: both[name]})


def test_every_field_is_declared_once_with_its_own_variable() -> None:
    declared = [s.field for s in SETTINGS]
    names = [env for s in SETTINGS for env in s.env]
    assert sorted(declared) == sorted(f.name for f in fields(ExtenderSettings))
    assert len(set(names)) == len(names)
