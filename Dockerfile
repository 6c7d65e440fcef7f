# The one phalanx image: ghcr.io/phalanx-scheduler/phalanx:0.1.0, named by every phalanx container in
# manifests/ (the extender sidecar, the placement manager, the node agent), each with its entry point:
#   gunicorn --config python:extender.gunicorn_conf 'extender.wsgi:create()'   (the default command)
#   python -m placement
#   python -m nodeagent
#   phalanx-scheduler   (the framework sidecar's scheduler, sidecar/kustomization.yaml)
# and the tools an admin runs in it: phalanx / kubectl-phalanx (the CLI), python -m simulator.
# Build: docker build -t ghcr.io/phalanx-scheduler/phalanx:0.1.0 .
# Not built in this repository's CI (no container engine there); tests/test_deployment.py checks that
# this file and the manifests agree (image, entry points, user) and builds the layout the build stage
# makes, without Docker, from exactly the paths below, and runs every entry point's --help in it.
#
# Every dependency is pinned with its hashes in requirements.lock (refresh it with hack/lock), so two
# builds of one commit install the same files.
#
# The base is pinned by version (Python 3.11.13 on Debian 12 "bookworm", slim). Pin its digest as well
# (FROM python:3.11.13-slim-bookworm@sha256:...) where the build runs: no registry is reachable here to
# read it.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
# The Go toolchain of sidecar/go.mod, pinned by version as well.
ARG GO_IMAGE=golang:1.26.8-bookworm

# Stage 1: install the package and its dependencies into a virtual environment. Every dependency ships
# manylinux wheels, so no compiler is needed.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/phalanx
WORKDIR /src
# The dependencies first, exactly as locked (a file whose hash differs fails the build), in their own
# layer: a change of the sources does not download them again. setuptools and wheel come from the lock
# too, so phalanx itself is built with them (--no-build-isolation) and nothing unpinned is fetched.
COPY requirements.lock ./
RUN /opt/phalanx/bin/pip install --require-hashes -r requirements.lock
# Every package [tool.setuptools.packages.find] in pyproject.toml includes, and nothing else.
COPY pyproject.toml README.md ./
COPY scheduling scheduling
COPY kubeio kubeio
COPY extender extender
COPY placement placement
COPY nodeagent nodeagent
COPY cli cli
COPY simulator simulator
# Bytecode is compiled here: the root filesystem is read-only at run time.
RUN /opt/phalanx/bin/pip install --no-deps --no-build-isolation . \
    && /opt/phalanx/bin/python -m compileall -q /opt/phalanx

# Stage 2: the framework sidecar's scheduler: kube-scheduler v1.36.3 with the PhalanxPlan plugin
# (sidecar/, docs/design/framework-sidecar.md), one static binary. The modules first, in their own layer,
# checked against go.sum.
# The version is stamped as upstream's release build stamps kube-scheduler's (hack/localcluster/build.py):
# the one of k8s.io/kubernetes in sidecar/go.mod.
FROM ${GO_IMAGE} AS sidecar
ARG KUBERNETES_VERSION=v1.36.3
ENV CGO_ENABLED=0 GOFLAGS="-trimpath -mod=readonly"
WORKDIR /src/sidecar
COPY sidecar/go.mod sidecar/go.sum ./
RUN go mod download
COPY sidecar/cmd cmd
COPY sidecar/plan plan
RUN go build -o /out/phalanx-scheduler -ldflags="-s -w \
      -X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} \
      -X k8s.io/component-base/version.gitMajor=1 \
      -X k8s.io/component-base/version.gitMinor=36 \
      -X k8s.io/component-base/version.gitTreeState=clean" \
    ./cmd/phalanx-scheduler

# Stage 3: the same base as stage 1, the environment and the scheduler binary only: no pip cache, no
# sources, no build tools.
FROM ${PYTHON_IMAGE}
COPY --from=build /opt/phalanx /opt/phalanx
COPY --from=sidecar /out/phalanx-scheduler /opt/phalanx/bin/phalanx-scheduler
# MALLOC_ARENA_MAX: glibc gives every thread of the extender's 256 its own malloc arena (up to 8 per
# core), and long-lived objects scattered over many arenas keep them from being returned: the resident
# size then creeps up over days without a leak. Two arenas is the usual setting for threaded Python.
ENV PATH=/opt/phalanx/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MALLOC_ARENA_MAX=2
WORKDIR /opt/phalanx
# nobody:nogroup, numeric so that runAsNonRoot can verify it; the manifests' runAsUser is the same.
USER 65534:65534
CMD ["gunicorn", "--config", "python:extender.gunicorn_conf", "extender.wsgi:create()"]
