"""The Dockerfile and the manifests agree: one image, its entry points, its user, locked-down containers.

The image cannot be built here (no container engine), so this reads both as text: every phalanx
container runs the image the Dockerfile says it builds, with an entry point that image provides, as the
Dockerfile's non-root USER, and every container (kube-scheduler's too) runs non-root with a read-only
root filesystem, no privilege escalation, no capabilities and the runtime's seccomp profile.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from placement.placement_settings import PlacementSettings
from tests.conftest import REPO

MANIFESTS = REPO / "manifests"
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "Job"}


@dataclass(frozen=True)
class Dockerfile:
    """What the tests need from the Dockerfile."""

    image: str
    """The name it is built as (``docker build -t NAME`` in its header)."""
    bases: tuple[str, ...]
    """The image of every ``FROM``, build arguments resolved."""
    user: str
    """The last ``USER``."""
    cmd: tuple[str, ...]
    """The default command (exec form)."""
    copied: frozenset[str]
    """Every source path ``COPY`` takes from the build context."""
    copies: tuple[tuple[tuple[str, ...], str, str], ...]
    """Each ``COPY`` from the build context into a Python stage, in order: its sources, its destination,
    the ``WORKDIR``."""
    go_copies: tuple[tuple[tuple[str, ...], str, str], ...]
    """The same for the Go stage (the framework sidecar's scheduler)."""
    args: dict[str, str]
    """Every ``ARG`` with a default."""


def parse_dockerfile(text: str) -> Dockerfile:
    """Read the instructions of a Dockerfile (one per line, after joining continued lines)."""
    args: dict[str, str] = {}
    bases, copied, user, cmd = [], set(), "", ()
    copies: list[tuple[tuple[str, ...], str, str]] = []
    go_copies: list[tuple[tuple[str, ...], str, str]] = []
    workdir = "/"
    logical = re.sub(r"\\\n", " ", text)
    for line in logical.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        instruction, _, rest = line.strip().partition(" ")
        instruction = instruction.upper()
        if instruction == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            args[name.strip()] = value.strip()
        elif instruction == "FROM":
            base = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args[m.group(1) or m.group(2)], rest.split()[0])
            bases.append(base)
            workdir = "/"
        elif instruction == "WORKDIR":
            workdir = rest.strip()
        elif instruction == "COPY" and "--from=" not in rest:
            *sources, destination = shlex.split(rest)
            if bases[-1].startswith("golang:"):
                go_copies.append((tuple(sources), destination, workdir))
            else:
                copied.update(sources)
                copies.append((tuple(sources), destination, workdir))
        elif instruction == "USER":
            user = rest.strip()
        elif instruction == "CMD":
            cmd = tuple(json.loads(rest))
    built = re.search(r"docker build -t (\S+)", text)
    assert built, "the Dockerfile's header says what it is built as: docker build -t NAME ."
    return Dockerfile(
        built.group(1), tuple(bases), user, cmd, frozenset(copied), tuple(copies), tuple(go_copies), args
    )


DOCKERFILE = parse_dockerfile((REPO / "Dockerfile").read_text())


@dataclass(frozen=True)
class Container:
    """One container of a workload in ``manifests/``, with its pod's spec."""

    where: str
    spec: dict[str, Any]
    pod: dict[str, Any]

    @property
    def security(self) -> dict[str, Any]:
        """The effective securityContext: the container's fields over the pod's."""
        return {**(self.pod.get("securityContext") or {}), **(self.spec.get("securityContext") or {})}

    @property
    def argv(self) -> tuple[str, ...]:
        """What the container runs: command and args, or the image's default."""
        command = self.spec.get("command")
        argv = tuple(command) if command is not None else DOCKERFILE.cmd
        return argv + tuple(self.spec.get("args") or ())


def containers() -> list[Container]:
    """Every container and init container of every workload in ``manifests/``."""
    found = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not document or document.get("kind") not in WORKLOAD_KINDS:
                continue
            pod = document["spec"]["template"]["spec"]
            for spec in (pod.get("initContainers") or []) + pod["containers"]:
                where = f"{path.name} {document['kind']}/{document['metadata']['name']} {spec['name']}"
                found.append(Container(where, spec, pod))
    return found


CONTAINERS = containers()
OURS = [c for c in CONTAINERS if c.spec["image"].split(":")[0] == DOCKERFILE.image.split(":")[0]]


def _ids(items: list[Container]) -> list[str]:
    return [c.where for c in items]


def test_the_manifests_run_three_phalanx_containers() -> None:
    assert sorted(c.spec["name"] for c in OURS) == ["extender", "node-agent", "placement"]


def test_every_phalanx_container_names_the_one_image_the_dockerfile_builds_and_the_readme_names() -> None:
    assert {c.spec["image"] for c in OURS} == {DOCKERFILE.image}
    assert DOCKERFILE.image in (REPO / "README.md").read_text()


def test_the_dockerfile_is_multi_stage_from_a_slim_base_pinned_by_version() -> None:
    assert len(DOCKERFILE.bases) >= 2
    for base in DOCKERFILE.bases:
        name, _, tag = base.partition("@")[0].partition(":")
        assert name in ("python", "golang"), base
        # a full version (3.11.13, 1.26.8), not a moving tag (3.11, latest); Python's slim
        assert re.fullmatch(r"\d+\.\d+\.\d+" + ("-slim" if name == "python" else "") + r"(-\w+)?", tag), base
    assert DOCKERFILE.bases[0].startswith("python:") and DOCKERFILE.bases[-1] == DOCKERFILE.bases[0]


def test_the_sidecar_scheduler_is_built_from_the_kubernetes_release_its_module_pins() -> None:
    """The image's ``phalanx-scheduler`` reports the kube-scheduler release it is built from."""
    pinned = re.search(
        r"^\s*k8s\.io/kubernetes (v\S+)$", (REPO / "sidecar" / "go.mod").read_text(), re.MULTILINE
    )
    assert pinned, "sidecar/go.mod requires k8s.io/kubernetes"
    version = pinned.group(1)
    assert DOCKERFILE.args["KUBERNETES_VERSION"] == version
    major, minor = version.lstrip("v").split(".")[:2]
    text = (REPO / "Dockerfile").read_text()
    assert f"gitMajor={major} " in text and f"gitMinor={minor} " in text
    assert "COPY --from=sidecar /out/phalanx-scheduler /opt/phalanx/bin/phalanx-scheduler" in text


def test_the_sidecar_install_runs_the_images_phalanx_scheduler_with_the_plan_key() -> None:
    """``kubectl apply -k sidecar/``: the scheduler container runs the binary the image puts on ``PATH``."""
    patch = yaml.safe_load((REPO / "sidecar" / "scheduler-patch.yaml").read_text())
    containers = {c["name"]: c for c in patch["spec"]["template"]["spec"]["containers"]}
    scheduler = containers["kube-scheduler"]
    assert scheduler["image"] == DOCKERFILE.image
    assert scheduler["command"][0] == "phalanx-scheduler"
    assert containers["extender"] == {"name": "extender", "$patch": "delete"}
    config = yaml.safe_load((REPO / "sidecar" / "scheduler-config.yaml").read_text())
    (plugin,) = config["profiles"][0]["pluginConfig"]
    mounts = {m["name"]: m["mountPath"] for m in scheduler["volumeMounts"]}
    assert plugin["args"]["keyFile"] == f"{mounts['plan-key']}/key"
    placement = yaml.safe_load((REPO / "sidecar" / "placement-patch.yaml").read_text())
    (container,) = placement["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {"PHALANX_GATE_PLAN_ON_POD": "true", "PHALANX_PLAN_KEY_FILE": plugin["args"]["keyFile"]}


def _module_entry(module: str) -> bool:
    """``python -m module`` works in the image: the package is copied, installed and has a __main__."""
    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return (
        (REPO / module / "__main__.py").is_file()
        and module in DOCKERFILE.copied
        and any(re.fullmatch(pattern.replace("*", ".*"), module) for pattern in include["include"])
    )


def _gunicorn_entry(argv: tuple[str, ...]) -> bool:
    """``gunicorn --config python:extender.gunicorn_conf extender.wsgi:create()``, as the image runs it."""
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    return (
        any(re.match(r"gunicorn\b", d) for d in dependencies)
        and argv[1:3] == ("--config", "python:extender.gunicorn_conf")
        and argv[-1] == "extender.wsgi:create()"
        and (REPO / "extender" / "gunicorn_conf.py").is_file()
        and re.search(r"^def create\(\)", (REPO / "extender" / "wsgi.py").read_text(), re.MULTILINE)
        is not None
        and "extender" in DOCKERFILE.copied
    )


@pytest.mark.parametrize("container", OURS, ids=_ids(OURS))
def test_every_phalanx_container_starts_an_entry_point_of_the_image(container: Container) -> None:
    argv = container.argv
    if argv[0] == "gunicorn":
        assert _gunicorn_entry(argv), argv
    else:
        assert argv[:2] == ("python", "-m"), argv
        assert _module_entry(argv[2]), argv


def test_the_image_default_command_is_the_extender_the_scheduler_pod_runs() -> None:
    (extender,) = [c for c in OURS if c.spec["name"] == "extender"]
    assert extender.argv == DOCKERFILE.cmd
    assert _gunicorn_entry(DOCKERFILE.cmd)


def test_the_dockerfile_user_is_numeric_and_not_root() -> None:
    uid, _, gid = DOCKERFILE.user.partition(":")
    assert uid.isdigit(), DOCKERFILE.user
    assert int(uid) != 0
    assert not gid or (gid.isdigit() and int(gid) != 0)


KUBELET_SOCKET_DIRS = {"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources"}
"""The only host paths any container may mount: the kubelet's device-plugin and PodResources sockets."""

NODE_SIDE = [c for c in OURS if c.spec["name"] == "node-agent"]
"""The one container that talks to the kubelet's sockets; they belong to root, so it runs as uid 0."""
ELSEWHERE = [c for c in CONTAINERS if c not in NODE_SIDE]


@pytest.mark.parametrize(
    "container", [c for c in OURS if c not in NODE_SIDE], ids=_ids([c for c in OURS if c not in NODE_SIDE])
)
def test_phalanx_containers_run_as_the_dockerfile_user(container: Container) -> None:
    uid, _, gid = DOCKERFILE.user.partition(":")
    assert container.security.get("runAsUser") == int(uid)
    if gid:
        assert container.security.get("runAsGroup") == int(gid)


@pytest.mark.parametrize("container", ELSEWHERE, ids=_ids(ELSEWHERE))
def test_every_container_but_the_node_agent_runs_as_a_user_that_is_not_root(container: Container) -> None:
    security = container.security
    assert security.get("runAsNonRoot") is True
    assert isinstance(security.get("runAsUser"), int)
    assert security["runAsUser"] != 0
    assert not [v for v in container.pod.get("volumes") or [] if "hostPath" in v]


@pytest.mark.parametrize("container", NODE_SIDE, ids=_ids(NODE_SIDE))
def test_the_node_agent_is_root_only_for_the_kubelet_sockets(container: Container) -> None:
    """User 0 with every capability dropped, and of the host only the two kubelet socket directories."""
    assert container.security.get("runAsUser") == 0
    host = {v["name"]: v["hostPath"] for v in container.pod.get("volumes") or [] if "hostPath" in v}
    assert {h["path"] for h in host.values()} == KUBELET_SOCKET_DIRS
    assert all(h.get("type") == "Directory" for h in host.values())
    mounts = {m["name"]: m for m in container.spec.get("volumeMounts") or []}
    assert {mounts[name]["mountPath"] for name in host} == KUBELET_SOCKET_DIRS
    assert (
        mounts[next(n for n, h in host.items() if h["path"].endswith("pod-resources"))].get("readOnly")
        is True
    )


@pytest.mark.parametrize("container", CONTAINERS, ids=_ids(CONTAINERS))
def test_every_container_is_locked_down(container: Container) -> None:
    security = container.security
    assert security.get("readOnlyRootFilesystem") is True
    assert security.get("allowPrivilegeEscalation") is False
    assert security.get("privileged") in (None, False)
    assert security.get("capabilities") == {"drop": ["ALL"]}  # and nothing added back
    assert (container.pod.get("securityContext") or {}).get("seccompProfile") == {"type": "RuntimeDefault"}
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        assert not container.pod.get(key), key
    host = [v["hostPath"]["path"] for v in container.pod.get("volumes") or [] if "hostPath" in v]
    assert set(host) <= KUBELET_SOCKET_DIRS


GUNICORN = [c for c in OURS if c.argv[0] == "gunicorn"]


@pytest.mark.parametrize("container", GUNICORN, ids=_ids(GUNICORN))
def test_gunicorn_has_a_writable_tmp_for_its_heartbeat(container: Container) -> None:
    """Its worker heartbeat file is in ``worker_tmp_dir``, by default the temp dir (/tmp)."""
    assert "worker_tmp_dir" not in (REPO / "extender" / "gunicorn_conf.py").read_text()
    volumes = {v["name"]: v for v in container.pod.get("volumes") or []}
    mounts = {m["mountPath"]: m for m in container.spec.get("volumeMounts") or []}
    assert "/tmp" in mounts
    assert "emptyDir" in volumes[mounts["/tmp"]["name"]]
    assert not mounts["/tmp"].get("readOnly")


@pytest.mark.parametrize("container", CONTAINERS, ids=_ids(CONTAINERS))
def test_no_probe_aims_at_a_loopback_the_kubelet_cannot_reach(container: Container) -> None:
    """The kubelet runs httpGet and tcpSocket probes from the node: ``host: 127.0.0.1`` is the node's."""
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        probe = container.spec.get(kind) or {}
        for action in ("httpGet", "tcpSocket"):
            assert (probe.get(action) or {}).get("host") in (None, ""), (kind, action, probe)


def test_the_extender_probes_ask_its_loopback_port_from_inside_the_container() -> None:
    (extender,) = [c for c in OURS if c.spec["name"] == "extender"]
    env = {e["name"]: e.get("value") for e in extender.spec.get("env") or []}
    port = env.get("PHALANX_PORT", "8888")
    for kind, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        command = extender.spec[kind]["exec"]["command"]
        assert command[:2] == ["python", "-c"], command
        assert f"http://127.0.0.1:{port}{path}" in command[2], command


def test_the_extender_serves_its_metrics_on_a_declared_port_apart_from_its_loopback_verbs() -> None:
    (extender,) = [c for c in OURS if c.spec["name"] == "extender"]
    env = {e["name"]: e.get("value") for e in extender.spec.get("env") or []}
    ports = {p["name"]: p["containerPort"] for p in extender.spec.get("ports") or []}
    assert env.get("PHALANX_BIND_ADDRESS") == "127.0.0.1", "the verbs stay on loopback"
    assert int(env["PHALANX_METRICS_PORT"]) == ports["metrics"] != int(env.get("PHALANX_PORT", "8888"))


def test_the_placement_manager_is_ready_only_when_its_gate_can_be_called_yet_always_reachable() -> None:
    """Readiness asks ``/readyz`` on the metrics port; the webhook Service still sends to a not-ready pod."""
    (placement,) = [c for c in OURS if c.spec["name"] == "placement"]
    env = {e["name"]: e.get("value") for e in placement.spec.get("env") or []}
    ports = {p["name"]: p["containerPort"] for p in placement.spec.get("ports") or []}
    probe = placement.spec["readinessProbe"]["httpGet"]
    assert probe["path"] == "/readyz"
    assert ports[probe["port"]] == int(env["PHALANX_PLACEMENT_METRICS_PORT"]), "the port /readyz is served on"
    assert env.get("PHALANX_WEBHOOK_CERTS", "internal") == "internal", "the shipped default"
    services = [
        d
        for d in yaml.safe_load_all((MANIFESTS / "pin-webhook.yaml").read_text())
        if d and d["kind"] == "Service" and d["metadata"]["name"] == "phalanx-placement-webhook"
    ]
    assert [s["spec"].get("publishNotReadyAddresses") for s in services] == [True]


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def test_the_shipped_secret_rbac_and_webhook_names_are_the_placement_managers_defaults() -> None:
    """``kubectl apply -k`` alone must give working webhooks: every name the defaults use is shipped."""
    defaults = PlacementSettings()
    placement = _documents("placement.yaml")
    (secret,) = [d for d in placement if d["kind"] == "Secret"]
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == (
        defaults.webhook_cert_secret,
        defaults.webhook_namespace,
    )
    assert "data" not in secret, "shipped empty: the placement manager fills it"
    secret_rules = [
        r for d in placement if d["kind"] == "Role" for r in d["rules"] if "secrets" in r["resources"]
    ]
    assert secret_rules == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [defaults.webhook_cert_secret],
            "verbs": ["get", "update"],
        }
    ]
    (role,) = [d for d in placement if d["kind"] == "ClusterRole"]
    (webhook_rule,) = [r for r in role["rules"] if "mutatingwebhookconfigurations" in r["resources"]]
    assert webhook_rule["resourceNames"] == list(defaults.webhook_configurations)
    configurations = [
        d["metadata"]["name"]
        for name in ("pin-webhook.yaml", "admission-gate-webhook.yaml")
        for d in _documents(name)
        if d["kind"] == "MutatingWebhookConfiguration"
    ]
    assert configurations == list(defaults.webhook_configurations)
    services = [d["metadata"]["name"] for d in _documents("pin-webhook.yaml") if d["kind"] == "Service"]
    assert services == [defaults.webhook_service]
