"""The image works: every entry point runs in the layout the Dockerfile builds, from locked dependencies.

There is no container engine here, so the build stage is replayed without Docker: exactly the paths its
``COPY`` lines take from the build context are copied into a directory laid out as its ``WORKDIR``, and
installed as the Dockerfile installs them (``pip install --no-deps --no-build-isolation .``) into a fresh
virtual environment. The dependencies are not downloaded again: the fresh environment sees those of
``.venv``, which ``hack/bootstrap`` installs from the same ``requirements.lock`` the image installs, but
not ``.venv``'s editable phalanx, so a package the Dockerfile forgets to copy is missing there as it
would be in the image. Then every entry point answers ``--help``: each ``python -m`` package, each
console script of ``pyproject.toml``, and the extender's gunicorn configuration and application module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker

from tests.conftest import REPO
from tests.test_deployment import DOCKERFILE

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
LOCK = REPO / "requirements.lock"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^ ;\\]+)(?:\s*;\s*([^\\]+?))?\s*\\?$", re.MULTILINE)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    """Package -> version of every pin in ``requirements.lock`` that applies to this interpreter."""
    pins = {}
    for name, version, marker in _PIN.findall(LOCK.read_text()):
        if marker and not _applies(marker):
            continue
        pins[_normal(name)] = version
    return pins


def _applies(marker: str) -> bool:
    """Whether an environment marker of the lock holds for this interpreter (PEP 508, by ``packaging``)."""
    return Marker(marker).evaluate()


def test_every_dependency_of_the_package_is_locked_with_hashes() -> None:
    pins = locked()
    for requirement in PYPROJECT["project"]["dependencies"]:
        name = _normal(re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0])
        assert name in pins, f"{requirement} is not in requirements.lock: run hack/lock"
    text = LOCK.read_text()
    hashed = re.findall(r"^\S+==[^\n]*\\\n    --hash=sha256:[0-9a-f]{64}", text, re.MULTILINE)
    assert len(hashed) == text.count("==") > 0, "every pin carries its hashes"


def test_the_image_installs_the_lock_with_hashes_then_the_package_alone() -> None:
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    runs = [line for line in text.splitlines() if line.strip().startswith("RUN ")]
    assert any("--require-hashes -r requirements.lock" in r for r in runs), runs
    assert any(re.search(r"pip install --no-deps --no-build-isolation \.( |$)", r) for r in runs), runs
    assert "requirements.lock" in DOCKERFILE.copied


def test_the_test_environment_has_the_locked_versions() -> None:
    """``.venv`` is what the image installs, so the built layout below runs on the image's versions."""
    wrong = {}
    for name, version in locked().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "missing"
        if installed != version:
            wrong[name] = f"{installed} (locked {version})"
    assert not wrong, f"run hack/bootstrap: {wrong}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The build stage replayed: its ``COPY`` sources laid out, installed into a fresh environment."""
    root = tmp_path_factory.mktemp("image")
    src = _lay_out(DOCKERFILE.copies, root)
    venv = root / "opt" / "phalanx"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    _share_dependencies(Path(sysconfig.get_paths()["purelib"]), site)
    install = ["install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation", "."]
    subprocess.run([python, "-m", "pip", *install], cwd=root / src.lstrip("/"), check=True, env=_clean_env())
    return venv


def _lay_out(copies: tuple[tuple[tuple[str, ...], str, str], ...], root: Path) -> str:
    """Copy exactly what ``copies`` take from the build context under ``root``; return their ``WORKDIR``."""
    for sources, destination, workdir in copies:
        target = root / workdir.lstrip("/") / destination
        for source in sources:
            path = REPO / source
            into = target / path.name if destination.endswith("/") else target
            into.parent.mkdir(parents=True, exist_ok=True)
            if path.is_dir():
                shutil.copytree(path, into, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, into)
    (src,) = {workdir for _, _, workdir in copies}
    return src


def test_the_sidecar_stage_builds_phalanx_scheduler_from_exactly_what_it_copies(tmp_path: Path) -> None:
    """The Go stage replayed: its ``COPY`` sources alone build ``phalanx-scheduler``, which then runs.

    Offline (``GOPROXY=off``): the modules come from the module cache ``hack/bootstrap`` filled when it
    built the same module for the test bed, as ``go mod download`` fills the image's.
    """
    src = tmp_path / _lay_out(DOCKERFILE.go_copies, tmp_path).lstrip("/")
    binary = tmp_path / "phalanx-scheduler"
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-trimpath -mod=readonly", "GOPROXY": "off"}
    build = ["go", "build", "-o", str(binary), "./cmd/phalanx-scheduler"]
    done = subprocess.run(build, cwd=src, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    helped = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60, check=False)
    assert helped.returncode == 0, helped.stderr[-2000:]
    assert "kube-scheduler" in helped.stdout


def _share_dependencies(ours: Path, theirs: Path) -> None:
    """Link every distribution in ``.venv`` into the fresh environment except phalanx's editable install."""
    own = re.compile(r"(__editable__.*phalanx.*|phalanx-.*\.dist-info|phalanx\.egg-link|__pycache__)")
    for entry in ours.iterdir():
        if not own.fullmatch(entry.name):
            (theirs / entry.name).symlink_to(entry)


def _clean_env() -> dict[str, str]:
    """The environment without anything that would put the checkout on ``sys.path``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}


def entry_points() -> list[tuple[str, ...]]:
    """Each command the image offers, as it is typed in the image's ``PATH`` (``/opt/phalanx/bin``)."""
    include = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(p.parent.name for p in REPO.glob("*/__main__.py"))
    modules = [
        ("python", "-m", name, "--help")
        for name in packages
        if any(re.fullmatch(pattern.replace("*", ".*"), name) for pattern in include)
    ]
    scripts = [(name, "--help") for name in sorted(PYPROJECT["project"]["scripts"])]
    gunicorn = [("python", "-m", "gunicorn", "--help"), ("python", "-c", "import extender.gunicorn_conf")]
    app = [("python", "-c", "from extender.wsgi import create; assert callable(create)")]
    return modules + scripts + gunicorn + app


@pytest.mark.parametrize("argv", entry_points(), ids=" ".join)
def test_every_entry_point_runs_in_the_built_layout(built: Path, argv: tuple[str, ...]) -> None:
    run = subprocess.run(
        [str(built / "bin" / argv[0]), *argv[1:]],
        cwd=built,  # not the checkout: nothing may come from it
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, f"{' '.join(argv)} failed in the built layout:\n{run.stderr[-3000:]}"
    if argv[-1] == "--help":
        assert "usage" in run.stdout.lower(), run.stdout


def test_the_simulator_ships_its_data(built: Path) -> None:
    data = "importlib.resources.files('simulator').joinpath('data/pollux')"
    probe = f"import importlib.resources; print(len(list({data}.iterdir())))"
    run = subprocess.run(
        [str(built / "bin" / "python"), "-c", probe],
        cwd=built,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 2, "the Pollux workloads are installed with the simulator"
