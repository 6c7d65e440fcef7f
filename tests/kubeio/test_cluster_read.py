"""One LIST of the cluster gives the same snapshot the watch-fed cache builds, and names what it skips."""

from __future__ import annotations

from typing import Any

import pytest

from kubeio.cluster_cache import PODGROUPS_PATH, ClusterCache
from kubeio.cluster_read import NODES_PATH, PODS_PATH, read_cluster
from kubeio.errors import KubeError, NotFoundError
from kubeio.http import JsonObject
from kubeio.native_podgroups import NATIVE_PODGROUPS_PATH
from kubeio.queue_objects import QUEUES_PATH
from kubeio.reflector import Collection, list_collection
from scheduling.cluster.promises import PromiseBook
from scheduling.queues.view import view_of
from scheduling.topology import uniform
from tests.kubeio.fake_api import FakeApi

BRIDGED = uniform(8, "SYS").to_json()


def raw_node(name: str, *, topology: str | None = BRIDGED, gpus: int = 8) -> JsonObject:
    annotations = {"phalanx.io/gpu-topology": topology} if topology is not None else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def raw_pod(
    name: str, *, node: str | None = None, gpus: str = "", group: str | None = None, phase: str = "Running"
) -> JsonObject:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    count = len(gpus.split(",")) if gpus else 0
    return {
        "metadata": {
            "uid": f"uid-{name}",
            "namespace": "ml",
            "name": name,
            "labels": labels,
            "annotations": {"phalanx.io/gpus": gpus} if gpus else {},
            "creationTimestamp": "2030-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": node,
            "schedulerName": "phalanx",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(count)}}}],
        },
        "status": {"phase": phase if node else "Pending"},
    }


def raw_group(name: str, min_member: int) -> JsonObject:
    return {
        "metadata": {"namespace": "ml", "name": name, "uid": f"uid-{name}"},
        "spec": {"minMember": min_member},
    }


def raw_queue(name: str, quota: int) -> JsonObject:
    return {"metadata": {"name": name}, "spec": {"resources": {"nvidia.com/gpu": {"quota": quota}}}}


def cluster() -> dict[str, list[JsonObject]]:
    return {
        NODES_PATH: [raw_node("n1"), raw_node("n2"), raw_node("n3", topology='{"v": 99}')],
        PODS_PATH: [
            raw_pod("w0", node="n1", gpus="0,1", group="g"),
            raw_pod("w1", node="n1", gpus="2,3", group="g"),
            raw_pod("solo", node="n2", gpus="5"),
            raw_pod("waiting", group="big"),
            raw_pod("done", node="n2", gpus="0", phase="Succeeded"),
        ],
        PODGROUPS_PATH: [raw_group("g", 2), raw_group("big", 2)],
        QUEUES_PATH: [raw_queue("b", 4), raw_queue("a", 8)],
    }


def test_the_read_snapshot_equals_the_cache_fed_with_the_same_objects() -> None:
    objects = cluster()
    found = read_cluster(FakeApi(objects))
    cache = ClusterCache()
    cache.replace_nodes(objects[NODES_PATH])
    cache.replace_pods(objects[PODS_PATH])
    cache.replace_podgroups(objects[PODGROUPS_PATH])
    cache.replace_queues(objects[QUEUES_PATH])
    fed = cache.snapshot()
    snapshot = found.snapshot
    assert dict(snapshot.nodes) == dict(fed.nodes)
    assert snapshot.all_pods() == fed.all_pods()
    assert snapshot.podgroups() == fed.podgroups()
    assert snapshot.queue_list() == fed.queue_list()
    assert dict(snapshot.usage) == dict(fed.usage)
    assert dict(snapshot.base_free) == dict(fed.base_free)
    assert [q.name for q in found.queues] == ["a", "b"]
    assert snapshot.usage_of("n1").held == frozenset({0, 1, 2, 3})
    assert snapshot.pod("ml", "done") is not None, "finished pods are kept: gangs count them"


def test_an_unreadable_topology_keeps_the_node_and_warns_with_its_name() -> None:
    found = read_cluster(FakeApi(cluster()))
    assert "n3" in found.snapshot.nodes
    assert found.snapshot.nodes["n3"].topology_problem is not None
    assert [w for w in found.warnings if w.startswith("node n3: annotation phalanx.io/gpu-topology")]
    assert found.skipped == ()


def test_malformed_objects_are_skipped_each_named_with_the_field() -> None:
    objects = cluster()
    bad_pod = raw_pod("broken", node="n2")
    bad_pod["spec"]["containers"] = "not a list"
    objects[PODS_PATH].append(bad_pod)
    objects[NODES_PATH].append({"metadata": {"name": "n9"}, "status": {"allocatable": {"cpu": "lots"}}})
    objects[PODGROUPS_PATH].append(raw_group("zero", 0))
    objects[QUEUES_PATH].append({"metadata": {"name": "c"}, "spec": {"resources": {"cpu": {"quota": []}}}})
    objects[PODS_PATH].append({"metadata": 7})
    found = read_cluster(FakeApi(objects))
    assert [(s.kind, s.name) for s in found.skipped] == [
        ("Node", "n9"),
        ("Pod", "?"),
        ("Pod", "ml/broken"),
        ("PodGroup", "ml/zero"),
    ]
    problems = "\n".join(found.problems())
    assert "Pod ml/broken skipped: spec.containers must be a list" in problems
    assert "PodGroup ml/zero skipped: spec.minMember must be an integer of at least 1" in problems
    assert "Node n9 skipped: status.allocatable" in problems
    assert "ml/broken" not in {p.key for p in found.snapshot.all_pods()}
    assert len(found.snapshot.pods) == 5, "the readable pods are all there"
    # A Queue whose spec cannot be read is kept, refused: the core sets it aside with the reason.
    [queue] = [q for q in found.queues if q.name == "c"]
    assert queue.problem == (
        "spec.resources.cpu.quota: a quantity must be a string such as '500m' or '16Gi', got list"
    )
    assert "c" in view_of(found.snapshot, PromiseBook()).tree.rejected


def test_missing_crds_read_as_empty_with_a_warning_but_missing_pods_fail() -> None:
    objects = cluster()
    del objects[PODGROUPS_PATH], objects[QUEUES_PATH]
    found = read_cluster(FakeApi(objects))
    assert found.snapshot.podgroups() == [] and found.queues == ()
    assert sum("is the CRD installed?" in w for w in found.warnings) == 2
    del objects[PODS_PATH]
    with pytest.raises(NotFoundError):
        read_cluster(FakeApi(objects))


def test_lists_are_read_page_by_page_until_the_last() -> None:
    items = [raw_node(f"n{i}") for i in range(7)]
    api = FakeApi({NODES_PATH: items})
    listed, version = list_collection(api, Collection(NODES_PATH, page_size=3, field_selector="x=y"))
    assert [n["metadata"]["name"] for n in listed] == [f"n{i}" for i in range(7)]
    assert version == "42"
    assert [q.get("continue") for _, q in api.queries] == [None, "3", "6"]
    assert all(q["fieldSelector"] == "x=y" and q["limit"] == "3" for _, q in api.queries)


class ForbiddenNative(FakeApi):
    """Answers 403 for Kubernetes' own PodGroups, as to a user whose role predates them."""

    def request(self, method: str, path: str, **kwargs: Any) -> JsonObject:
        if path == NATIVE_PODGROUPS_PATH:
            raise KubeError(403, "Forbidden", "podgroups.scheduling.k8s.io is forbidden")
        return super().request(method, path, **kwargs)


def test_kubernetes_own_podgroups_are_read_beside_the_others_and_a_forbidden_list_is_said() -> None:
    objects = cluster()
    native = {
        "metadata": {"namespace": "ml", "name": "nat"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    objects[NATIVE_PODGROUPS_PATH] = [native]
    found = read_cluster(FakeApi(objects))
    assert [(g.name, g.native) for g in found.snapshot.podgroups()] == [
        ("big", False),
        ("g", False),
        ("nat", True),
    ]
    assert not any("scheduling.k8s.io" in w for w in found.warnings)  # absent elsewhere: no warning
    forbidden = read_cluster(ForbiddenNative(objects))
    assert [g.name for g in forbidden.snapshot.podgroups()] == ["big", "g"]
    assert any("PodGroup.scheduling.k8s.io objects cannot be listed" in w for w in forbidden.warnings)
