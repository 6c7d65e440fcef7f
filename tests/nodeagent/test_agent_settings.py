from __future__ import annotations

from dataclasses import dataclass, fields

import pytest

from nodeagent.agent_settings import SETTINGS, AgentSettings, parse_settings


@dataclass(frozen=True)
class Case:
    id: str
    argv: list[str]
    environ: dict[str, str]
    expected: AgentSettings


CASES = [
    Case("env-only", [], {"NODE_NAME": "gpu-node-7"}, AgentSettings(node_name="gpu-node-7")),
    Case(
        "flags-win",
        ["--node", "a", "--kubeconfig", "/k", "--interval", "30", "--max-backoff", "120"],
        {"NODE_NAME": "b", "KUBECONFIG": "/env", "PHALANX_NODE_AGENT_INTERVAL_SECONDS": "90"},
        AgentSettings(node_name="a", kubeconfig="/k", interval_seconds=30, max_backoff_seconds=120),
    ),
    Case(
        "env-numbers",
        [],
        {
            "NODE_NAME": "n",
            "PHALANX_NODE_AGENT_INTERVAL_SECONDS": "2.5",
            "PHALANX_NODE_AGENT_MAX_BACKOFF_SECONDS": "30",
            "PHALANX_API_TIMEOUT_SECONDS": "3",
            "PHALANX_LOG_LEVEL": "debug",
        },
        AgentSettings(
            node_name="n",
            interval_seconds=2.5,
            initial_backoff_seconds=2.5,
            max_backoff_seconds=30,
            api_timeout_seconds=3,
            log_level="DEBUG",
        ),
    ),
    Case("empty-env-is-unset", ["--node", "n"], {"KUBECONFIG": ""}, AgentSettings(node_name="n")),
    Case("print-needs-no-node", ["--print"], {}, AgentSettings(print_only=True)),
    Case(
        "device-plugin-flag-takes-an-optional-value",
        ["--node", "n", "--device-plugin", "false", "--once"],
        {"PHALANX_DEVICE_PLUGIN": "true"},
        AgentSettings(node_name="n", device_plugin=False, once=True),
    ),
    Case(
        "fake",
        ["--node", "n", "--once", "--fake-topology", "t.txt", "--fake-gpu-model", "NVIDIA L40S"],
        {},
        AgentSettings(node_name="n", once=True, fake_topology="t.txt", fake_gpu_model="NVIDIA L40S"),
    ),
    Case(
        "node-side-flags",
        ["--node", "n", "--device-plugin", "--device-plugin-dir", "/d", "--pod-resources-socket", "/p.sock"],
        {"PHALANX_TRUTH_INTERVAL_SECONDS": "0.5", "PHALANX_NODE_AGENT_METRICS_PORT": "9402"},
        AgentSettings(
            node_name="n",
            device_plugin=True,
            device_plugin_dir="/d",
            pod_resources_socket="/p.sock",
            truth_interval_seconds=0.5,
            metrics_port=9402,
        ),
    ),
    Case(
        "observe-mode-from-env",
        ["--fake-xid-file", "/x"],
        {"NODE_NAME": "n", "PHALANX_DEVICE_PLUGIN": "False", "PHALANX_POD_RESOURCES_SOCKET": ""},
        AgentSettings(node_name="n", device_plugin=False, pod_resources_socket="", fake_xid_file="/x"),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_flags_fall_back_to_the_environment(case: Case) -> None:
    assert parse_settings(case.argv, case.environ) == case.expected


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        ([], {}, "node name is required"),
        (["--node", "n", "--interval", "0"], {}, "'0' must be a finite positive number"),
        ([], {"NODE_NAME": "n", "PHALANX_NODE_AGENT_INTERVAL_SECONDS": "soon"}, "is not a number"),
        (["--node", "n", "--max-backoff", "inf"], {}, "'inf' must be a finite positive number"),
        (["--node", "n", "--log-level", "chatty"], {}, "'chatty' is not one of 'debug'"),
        ([], {"NODE_NAME": "n", "PHALANX_DEVICE_PLUGIN": "maybe"}, "'maybe' is not a valid boolean"),
        (["--node", "n", "--metrics-port", "70000"], {}, "70000 is not in the range 0<=x<=65535"),
    ],
    ids=[
        "no-node",
        "zero-interval",
        "bad-env-interval",
        "infinite-backoff",
        "bad-log-level",
        "bad-mode",
        "bad-port",
    ],
)
def test_bad_settings_exit_with_usage(
    argv: list[str], environ: dict[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_settings(argv, environ)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_every_field_but_the_derived_backoff_is_declared_once_with_one_flag() -> None:
    declared = [s.field for s in SETTINGS]
    flags = [s.flag for s in SETTINGS]
    assert len(set(flags)) == len(flags)
    assert sorted(declared) == sorted(
        f.name for f in fields(AgentSettings) if f.name != "initial_backoff_seconds"
    )
