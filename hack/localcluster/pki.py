"""The cluster's credentials: CA, serving certificate, service-account key, tokens and kubeconfigs.

TLS stays on and verified even on loopback so the clients under test (the extender, kubectl,
kube-scheduler) run exactly as they would against a real cluster. Everything is made with the ``openssl``
command line tool, since the standard library cannot create certificates, once per state directory and
reused on every start, so kubeconfigs and tokens handed out stay valid across restarts.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from localcluster.errors import ClusterError

EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
"""openssl req options for a fresh, unencrypted EC P-256 key (small and fast to make)."""

MPI_OPERATOR_USER = "system:serviceaccount:mpi-operator:mpi-operator"
"""The MPI Operator's identity: a static token named as the ServiceAccount its own install runs as, so
the ClusterRoleBinding of a real install applies to it unchanged."""

NODE_AGENT_USER = "system:serviceaccount:phalanx-system:phalanx-node-agent"
"""The node agents' identity on the test bed: the ServiceAccount of ``manifests/node-agent.yaml``, so the
manifest's RBAC is what the agents run with."""

DAYS = "3650"
"""Validity of every certificate: longer than any local cluster lives."""

APISERVER_NAMES = (
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    "IP:127.0.0.1",
    "IP:10.0.0.1",
)
"""Subject alternative names of the apiserver's certificate: loopback and the in-cluster names."""


def write_private(path: Path, text: str) -> None:
    """Write a secret-bearing file atomically with mode 0600."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    tmp.replace(path)


def _run_openssl(*args: str) -> None:
    """Run one openssl command, turning failure into a ClusterError with its output."""
    if shutil.which("openssl") is None:
        msg = "the 'openssl' command is needed to create certificates"
        raise ClusterError(msg)
    result = subprocess.run(
        ["openssl", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        msg = f"openssl {' '.join(args[:2])} failed:\n{result.stderr}"
        raise ClusterError(msg)


def _new_key_request(mode: str, key: Path, out: Path, subject: str, *extra: str) -> None:
    """Make a new EC key and, from it, a self-signed certificate (``-x509``) or a CSR (``-new``)."""
    _run_openssl("req", mode, *EC_KEY, "-keyout", str(key), "-out", str(out), "-subj", subject, *extra)


def ensure_pki(pki: Path) -> None:
    """Create the CA, apiserver serving cert and service-account key in ``pki`` unless present.

    They are kept across restarts so kubeconfigs and tokens handed out stay valid. A new CA
    invalidates the apiserver certificate, which is then made again.
    """
    ca_key, ca_crt = pki / "ca.key", pki / "ca.crt"
    if not (ca_key.exists() and ca_crt.exists()):
        _new_key_request(
            "-x509",
            ca_key,
            ca_crt,
            "/CN=phalanx-local-ca",
            "-days",
            DAYS,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
        for signed in pki.glob("*.crt"):  # signed by the old CA: made again on demand
            if signed != ca_crt:
                signed.unlink()
    ensure_serving_cert(pki, "apiserver", "/CN=kube-apiserver", APISERVER_NAMES)
    sa_key, sa_pub = pki / "sa.key", pki / "sa.pub"
    if not (sa_key.exists() and sa_pub.exists()):
        _run_openssl("genrsa", "-out", str(sa_key), "2048")
        _run_openssl("rsa", "-in", str(sa_key), "-pubout", "-out", str(sa_pub))
    for private in (ca_key, sa_key):
        private.chmod(0o600)


def ensure_serving_cert(pki: Path, name: str, subject: str, names: tuple[str, ...]) -> tuple[Path, Path]:
    """A TLS serving certificate signed by the cluster's CA, made once: (``<name>.key``, ``<name>.crt``).

    Used for the apiserver and for the servers the apiserver calls (the pin webhook), which it verifies
    against this CA.
    """
    key, crt = pki / f"{name}.key", pki / f"{name}.crt"
    if key.exists() and crt.exists():
        return key, crt
    csr, ext = pki / f"{name}.csr", pki / f"{name}.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
        f"subjectAltName={','.join(names)}\n"
    )
    _new_key_request("-new", key, csr, subject)
    _run_openssl(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(pki / "ca.crt"),
        "-CAkey",
        str(pki / "ca.key"),
        "-set_serial",
        f"0x{secrets.token_hex(16)}",
        "-days",
        DAYS,
        "-extfile",
        str(ext),
        "-out",
        str(crt),
    )
    csr.unlink()
    ext.unlink()
    key.chmod(0o600)
    return key, crt


def read_tokens(path: Path) -> dict[str, str]:
    """Return user -> bearer token from the apiserver's static token file (empty if there is none)."""
    tokens: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return tokens
    for line in lines:
        fields = line.split(",")
        if len(fields) >= 2:
            tokens[fields[1]] = fields[0]
    return tokens


USERS: dict[str, tuple[str, str]] = {
    "admin": ("phalanx-admin", "system:masters"),
    "system:kube-scheduler": ("phalanx-kube-scheduler", ""),
    "system:kube-controller-manager": ("phalanx-kube-controller-manager", ""),
    MPI_OPERATOR_USER: ("phalanx-mpi-operator", "system:serviceaccounts,system:serviceaccounts:mpi-operator"),
    NODE_AGENT_USER: ("phalanx-node-agent", "system:serviceaccounts,system:serviceaccounts:phalanx-system"),
}
"""User -> (uid, comma-separated groups) of every static token the apiserver accepts."""


def ensure_tokens(path: Path) -> None:
    """Create the static token file, or add the users it lacks; existing tokens are kept."""
    tokens = read_tokens(path)
    missing = [user for user in USERS if user not in tokens]
    if not missing:
        return
    try:
        text = path.read_text()
    except OSError:
        text = ""
    for user in missing:
        uid, groups = USERS[user]
        line = f"{secrets.token_hex(24)},{user},{uid}" + (f',"{groups}"' if groups else "")
        text += ("" if not text or text.endswith("\n") else "\n") + line + "\n"
    write_private(path, text)


def write_kubeconfig(path: Path, port: int, ca_file: Path, user: str, token: str) -> None:
    """Write a kubeconfig for ``user`` that verifies the apiserver on ``port`` against ``ca_file``."""
    ca = base64.b64encode(ca_file.read_bytes()).decode()
    write_private(
        path,
        (
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: phalanx-local\n"
            "  cluster:\n"
            f"    server: https://127.0.0.1:{port}\n"
            f"    certificate-authority-data: {ca}\n"
            "users:\n"
            f"- name: {json.dumps(user)}\n"
            "  user:\n"
            f"    token: {token}\n"
            "contexts:\n"
            "- name: phalanx-local\n"
            "  context:\n"
            "    cluster: phalanx-local\n"
            f"    user: {json.dumps(user)}\n"
            "current-context: phalanx-local\n"
        ),
    )
