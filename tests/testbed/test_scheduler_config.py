"""The local scheduler's config is the shipped one, with the extender URL (and, for https, its CA)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO

sys.path.insert(0, str(REPO / "hack"))

from localcluster.config import render_scheduler_config

SHIPPED = (REPO / "manifests" / "scheduler-config.yaml").read_text()


def _extender(text: str) -> dict[str, Any]:
    (extender,) = yaml.safe_load(text)["extenders"]
    assert isinstance(extender, dict)
    return extender


def test_the_shipped_config_calls_the_sidecar_over_plain_http_on_loopback() -> None:
    extender = _extender(SHIPPED)
    assert extender["urlPrefix"] == "http://127.0.0.1:8888"
    assert extender["enableHTTPS"] is False
    assert "tlsConfig" not in extender


def test_an_https_extender_is_verified_against_the_local_ca() -> None:
    ca = Path("/state/pki/ca.crt")
    rendered = render_scheduler_config(SHIPPED, Path("/k"), "https://127.0.0.1:9443", extender_ca=ca)
    extender = _extender(rendered)
    assert extender["urlPrefix"] == "https://127.0.0.1:9443"
    assert extender["enableHTTPS"] is True
    assert extender["tlsConfig"] == {"insecure": False, "caFile": str(ca)}
    assert extender["bindVerb"] == "bind"  # the rest of the extender's mapping is untouched


def test_a_plain_http_extender_gets_no_tls_config_even_with_a_ca() -> None:
    rendered = render_scheduler_config(SHIPPED, Path("/k"), "http://127.0.0.1:9000", extender_ca=Path("/ca"))
    extender = _extender(rendered)
    assert extender["urlPrefix"] == "http://127.0.0.1:9000"
    assert extender["enableHTTPS"] is False
    assert "tlsConfig" not in extender
