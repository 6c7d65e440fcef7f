"""Each component's ServiceAccount can do what its code does, and not more (manifests' RBAC, real API server).

The RBAC documents of ``manifests/`` (ServiceAccounts, Roles, ClusterRoles and their bindings; no
workloads) are applied server-side; then, impersonating each ServiceAccount, a SelfSubjectAccessReview
asks the API server's RBAC authorizer about every request the component makes (allowed) and about a
list it must never make (denied). The "needs" rows name the code that makes the request.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from localbed import Testbed
from workload import ensure_namespace

from tests.conftest import REPO

NAMESPACE = "phalanx-system"
RBAC_KINDS = {"ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
MANIFESTS = (
    "rbac.yaml",
    "placement.yaml",
    "node-agent.yaml",
    "scheduler.yaml",
    "pin-webhook.yaml",
    "admission-gate-webhook.yaml",
)

WEBHOOK_CERTS = "phalanx-placement-webhook-certs"  # the Secret of the placement manager's certificates
WEBHOOKS = ("phalanx-pin-webhook", "phalanx-admission-gate")
ADMISSION = "admissionregistration.k8s.io"

SCHEDULER = "phalanx-scheduler"  # kube-scheduler and the extender sidecar: one pod, one account
PLACEMENT = "phalanx-placement"
NODE_AGENT = "phalanx-node-agent"


@dataclass(frozen=True)
class Ask:
    """One question to the authorizer: may ``verb`` be done on ``resource`` (and where)?"""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        group = f".{self.group}" if self.group else ""
        where = f" in {self.namespace}" if self.namespace else ""
        return f"{self.verb} {what}{group}{where}" + (f" named {self.name}" if self.name else "")


ANY_NS = "team-a"  # a namespace of workloads: cluster-wide rules must reach it

NEEDS: dict[str, list[Ask]] = {
    SCHEDULER: [
        # extender: kubeio/cluster_cache.py list+watch of nodes, live pods, PodGroups, Queues
        *(Ask(v, "nodes") for v in ("list", "watch")),
        *(Ask(v, "pods") for v in ("list", "watch")),
        *(Ask(v, "podgroups", "scheduling.x-k8s.io") for v in ("list", "watch")),
        *(Ask(v, "queues", "scheduling.phalanx.io") for v in ("list", "watch")),
        # extender: kubeio/binding.py get_pod (a pod not yet in the cache), bind (POST pods/binding),
        # touch (merge-patch phalanx.io/nudge, extender/nudger.py)
        Ask("get", "pods", namespace=ANY_NS, name="p"),
        Ask("create", "pods", subresource="binding", namespace=ANY_NS, name="p"),
        Ask("patch", "pods", namespace=ANY_NS, name="p"),
        # extender: kubeio/nominations.py (reserved gang members' nominated node, extender/nominator.py)
        Ask("patch", "pods", subresource="status", namespace=ANY_NS, name="p"),
        # extender: kubeio/podgroups.py set_plan (PATCH the PodGroup), delete_pod (gang rollback)
        Ask("patch", "podgroups", "scheduling.x-k8s.io", namespace=ANY_NS, name="g"),
        # the same for Kubernetes' own PodGroups (kubeio/native_podgroups.py; the alpha Workload API)
        *(Ask(v, "podgroups", "scheduling.k8s.io") for v in ("list", "watch")),
        Ask("patch", "podgroups", "scheduling.k8s.io", namespace=ANY_NS, name="g"),
        Ask("delete", "pods", namespace=ANY_NS, name="p"),
        # extender and kube-scheduler: kubeio/events.py POST core/v1 Events
        Ask("create", "events", namespace=ANY_NS),
        # kube-scheduler: leader election on the Lease named in scheduler-config.yaml
        Ask("create", "leases", "coordination.k8s.io", namespace="kube-system"),
        Ask("get", "leases", "coordination.k8s.io", namespace="kube-system", name="phalanx-scheduler"),
        Ask("update", "leases", "coordination.k8s.io", namespace="kube-system", name="phalanx-scheduler"),
        # kube-scheduler: delegated authentication of its secure port (the request-header CA)
        Ask("get", "configmaps", namespace="kube-system", name="extension-apiserver-authentication"),
    ],
    PLACEMENT: [
        # kubeio/cluster_cache.py list+watch (nodes, all pods, PodGroups, Queues)
        *(Ask(v, "nodes") for v in ("list", "watch")),
        *(Ask(v, "pods") for v in ("list", "watch")),
        *(Ask(v, "podgroups", "scheduling.x-k8s.io") for v in ("list", "watch")),
        *(Ask(v, "queues", "scheduling.phalanx.io") for v in ("list", "watch")),
        # kubeio/podgroups.py set_status, delete_pod (stale gang eviction, reclaim, elastic moves)
        Ask("patch", "podgroups", "scheduling.x-k8s.io", "status", namespace=ANY_NS, name="g"),
        *(Ask(v, "podgroups", "scheduling.k8s.io") for v in ("list", "watch")),
        Ask("patch", "podgroups", "scheduling.k8s.io", "status", namespace=ANY_NS, name="g"),
        Ask("delete", "pods", namespace=ANY_NS, name="p"),
        # kubeio/nominations.py: nominate a pod the release pass places (status.nominatedNodeName)
        Ask("patch", "pods", subresource="status", namespace=ANY_NS, name="p"),
        # kubeio/queue_objects.py QueueWriter.set_status
        Ask("patch", "queues", "scheduling.phalanx.io", "status", name="q"),
        # kubeio/mpijobs.py: list all MPIJobs, get one, patch it (replicas, plan); list a job's workers
        Ask("list", "mpijobs", "kubeflow.org"),
        Ask("get", "mpijobs", "kubeflow.org", namespace=ANY_NS, name="j"),
        Ask("patch", "mpijobs", "kubeflow.org", namespace=ANY_NS, name="j"),
        Ask("list", "pods", namespace=ANY_NS),
        # kubeio/pins.py: get + JSON-patch a waiting worker (toleration) and a node (pin taint)
        Ask("get", "pods", namespace=ANY_NS, name="p"),
        Ask("patch", "pods", namespace=ANY_NS, name="p"),
        Ask("get", "nodes", name="n"),
        Ask("patch", "nodes", name="n"),
        # kubeio/events.py
        Ask("create", "events", namespace=ANY_NS),
        # kubeio/lease.py: create, get and update its own Lease in its own namespace
        Ask("create", "leases", "coordination.k8s.io", namespace=NAMESPACE),
        Ask("get", "leases", "coordination.k8s.io", namespace=NAMESPACE, name="phalanx-placement"),
        Ask("update", "leases", "coordination.k8s.io", namespace=NAMESPACE, name="phalanx-placement"),
        # placement/cert_keeper.py via kubeio/secrets.py: read and replace the one Secret of its certificates
        Ask("get", "secrets", namespace=NAMESPACE, name=WEBHOOK_CERTS),
        Ask("update", "secrets", namespace=NAMESPACE, name=WEBHOOK_CERTS),
        # placement/webhook_watch.py via kubeio/webhook_configs.py: read its configurations, write their CA
        *(
            Ask(v, "mutatingwebhookconfigurations", ADMISSION, name=n)
            for v in ("get", "patch")
            for n in WEBHOOKS
        ),
        # placement/visibility.py via kubeio/access_review.py: who holds a caller's token, may they get it
        Ask("create", "tokenreviews", "authentication.k8s.io"),
        Ask("create", "subjectaccessreviews", "authorization.k8s.io"),
    ],
    NODE_AGENT: [
        # kubeio/node_annotations.py: GET its Node, merge-patch the topology and unhealthy-GPU annotations
        Ask("get", "nodes", name="n"),
        Ask("patch", "nodes", name="n"),
        # kubeio/node_pods.py: list/watch the pods bound to its node (field selector spec.nodeName),
        # re-list when the kubelet asks about a pod not seen yet, merge-patch phalanx.io/gpus
        Ask("list", "pods"),
        Ask("watch", "pods"),
        Ask("get", "pods", namespace=ANY_NS, name="p"),
        Ask("patch", "pods", namespace=ANY_NS, name="p"),
        # kubeio/events.py: GPUsCorrected, GPUsGuessed, GPUUnhealthy on pods
        Ask("create", "events", namespace=ANY_NS),
    ],
}

EVERYONE_DENIED = [
    Ask("get", "secrets", namespace=NAMESPACE, name="phalanx-placement-webhook-tls"),
    Ask("list", "secrets"),
    Ask("*", "*", "*"),
    Ask("create", "pods", subresource="exec", namespace=ANY_NS, name="p"),
    Ask("create", "clusterrolebindings", "rbac.authorization.k8s.io"),
    Ask("escalate", "clusterroles", "rbac.authorization.k8s.io"),
    Ask("impersonate", "serviceaccounts", namespace=NAMESPACE),
    Ask("create", "serviceaccounts", subresource="token", namespace=NAMESPACE, name=PLACEMENT),
    Ask("create", "pods", namespace=ANY_NS),
    Ask("delete", "nodes", name="n"),
    Ask("update", "configmaps", namespace="kube-system", name="extension-apiserver-authentication"),
]

MUST_NOT: dict[str, list[Ask]] = {
    SCHEDULER: [
        *EVERYONE_DENIED,
        Ask("get", "secrets", namespace=NAMESPACE, name=WEBHOOK_CERTS),
        Ask("patch", "mutatingwebhookconfigurations", ADMISSION, name="phalanx-admission-gate"),
        Ask("patch", "nodes", name="n"),  # the extender only reads nodes; node writes are not its job
        Ask("patch", "podgroups", "scheduling.x-k8s.io", "status", namespace=ANY_NS, name="g"),
        Ask("patch", "podgroups", "scheduling.k8s.io", "status", namespace=ANY_NS, name="g"),
        Ask("patch", "queues", "scheduling.phalanx.io", "status", name="q"),
        Ask("update", "leases", "coordination.k8s.io", namespace=NAMESPACE, name="phalanx-placement"),
        Ask("patch", "mpijobs", "kubeflow.org", namespace=ANY_NS, name="j"),
    ],
    PLACEMENT: [
        *EVERYONE_DENIED,
        Ask("create", "pods", subresource="binding", namespace=ANY_NS, name="p"),  # binding is the extender's
        Ask("update", "leases", "coordination.k8s.io", namespace="kube-system", name="phalanx-scheduler"),
        Ask("update", "leases", "coordination.k8s.io", namespace=NAMESPACE, name="someone-else"),
        Ask("delete", "mpijobs", "kubeflow.org", namespace=ANY_NS, name="j"),
        Ask("patch", "podgroups", "scheduling.x-k8s.io", namespace=ANY_NS, name="g"),  # status only
        Ask("patch", "podgroups", "scheduling.k8s.io", namespace=ANY_NS, name="g"),  # status only
        # no create: with it and get by name it could mint a service-account token Secret of that name
        Ask("create", "secrets", namespace=NAMESPACE),
        Ask("get", "secrets", namespace=NAMESPACE, name="phalanx-scheduler-token"),
        Ask("update", "secrets", namespace=NAMESPACE, name="phalanx-placement-webhook-tls"),
        Ask("get", "secrets", namespace=ANY_NS, name=WEBHOOK_CERTS),
        Ask("patch", "mutatingwebhookconfigurations", ADMISSION, name="someone-elses-webhook"),
        Ask("list", "mutatingwebhookconfigurations", ADMISSION),
        Ask("patch", "validatingwebhookconfigurations", ADMISSION, name="phalanx-admission-gate"),
    ],
    NODE_AGENT: [
        *EVERYONE_DENIED,
        Ask("list", "nodes"),  # it reads only its own Node, by name
        Ask("patch", "nodes", subresource="status", name="n"),
        Ask("patch", "pods", subresource="status", namespace=ANY_NS, name="p"),
        Ask("create", "pods", subresource="binding", namespace=ANY_NS, name="p"),
        Ask("create", "pods", subresource="eviction", namespace=ANY_NS, name="p"),
        Ask("delete", "pods", namespace=ANY_NS, name="p"),
        Ask("create", "pods", namespace=ANY_NS),
        Ask("update", "pods", namespace=ANY_NS, name="p"),
    ],
}


def rbac_documents() -> list[dict[str, Any]]:
    """The manifests' RBAC objects, in file order."""
    found = []
    for name in MANIFESTS:
        for document in yaml.safe_load_all((REPO / "manifests" / name).read_text()):
            if document and document.get("kind") in RBAC_KINDS:
                found.append(document)
    return found


@pytest.fixture(scope="module")
def rbac(testbed: Testbed) -> Iterator[Testbed]:
    """The test bed with the manifests' RBAC applied, deleted afterwards.

    Deleted so that the session's API server is as other tests expect it (test_manifests.py's dry run
    reports the objects as created); the namespace stays.
    """
    ensure_namespace(testbed.http, NAMESPACE)
    text = yaml.safe_dump_all(rbac_documents())
    testbed.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=text)
    yield testbed
    testbed.cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=text)


def allowed(bed: Testbed, account: str, ask: Ask) -> tuple[bool, str]:
    """(allowed, reason) of a SelfSubjectAccessReview made as ServiceAccount ``account``."""
    attributes = {"verb": ask.verb, "group": ask.group, "resource": ask.resource}
    attributes |= {"subresource": ask.subresource, "namespace": ask.namespace, "name": ask.name}
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {k: v for k, v in attributes.items() if v}},
    }
    request = urllib.request.Request(
        bed.cluster.server + "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Authorization": f"Bearer {bed.cluster.admin_token}",
            "Content-Type": "application/json",
            # KubeHttp sends no extra headers; the admin (system:masters) may impersonate anyone
            "Impersonate-User": f"system:serviceaccount:{NAMESPACE}:{account}",
            "Impersonate-Group": "system:serviceaccounts",
        },
    )
    context: ssl.SSLContext = bed.cluster.ssl_context()
    with urllib.request.urlopen(request, context=context, timeout=10) as reply:
        status = json.loads(reply.read())["status"]
    return bool(status.get("allowed")), str(status.get("reason", ""))


def _cases(table: dict[str, list[Ask]]) -> list[Any]:
    return [
        pytest.param(account, ask, id=f"{account}: {ask}") for account, asks in table.items() for ask in asks
    ]


@pytest.mark.parametrize(("account", "ask"), _cases(NEEDS))
def test_each_account_may_do_what_its_component_does(rbac: Testbed, account: str, ask: Ask) -> None:
    ok, reason = allowed(rbac, account, ask)
    assert ok, f"{account} may not {ask}: {reason or 'no rule allows it'}"


@pytest.mark.parametrize(("account", "ask"), _cases(MUST_NOT))
def test_no_account_may_do_more(rbac: Testbed, account: str, ask: Ask) -> None:
    ok, reason = allowed(rbac, account, ask)
    assert not ok, f"{account} may {ask}: {reason}"


def test_an_account_with_no_bindings_is_denied(rbac: Testbed) -> None:
    """The check itself: impersonation really changes who asks (an unbound account gets nothing)."""
    assert not allowed(rbac, "nobody-bound", Ask("get", "nodes", name="n"))[0]
