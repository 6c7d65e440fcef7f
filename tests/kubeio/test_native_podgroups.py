"""Kubernetes' own PodGroup (``scheduling.k8s.io``) read into the one gang model, and written back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kubeio.cluster_cache import NATIVE_PODGROUP, ClusterCache
from kubeio.convert import ConvertError, pod_from_api, podgroup_from_api
from kubeio.native_podgroups import GANG_CONDITION, native_podgroup_from_api, native_status
from kubeio.podgroups import PodGroupWriter
from kubeio.render import podgroup_status
from scheduling.gang.status import gang_status
from scheduling.model import DEFAULT_SCHEDULE_TIMEOUT_SECONDS, PodGroup, Resources
from tests.builders import a_pod
from tests.kubeio.fake_api import FakeApi


def native(name: str, policy: object, *, conditions: object = None, uid: str = "g1") -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {"namespace": "ml", "name": name, "uid": uid},
        "spec": {"schedulingPolicy": policy},
    }
    if conditions is not None:
        raw["status"] = {"conditions": conditions}
    return raw


def plugins(name: str, min_member: int) -> dict[str, Any]:
    return {"metadata": {"namespace": "ml", "name": name, "uid": "p1"}, "spec": {"minMember": min_member}}


def pod(name: str, spec: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"uid": name, "namespace": "ml", "name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def test_a_gang_policy_is_a_gang_of_its_min_count() -> None:
    group = native_podgroup_from_api(native("train", {"gang": {"minCount": 4}}))
    assert group == PodGroup("ml", "train", 4, DEFAULT_SCHEDULE_TIMEOUT_SECONDS, uid="g1", native=True)


def test_a_basic_policy_is_a_group_of_one() -> None:
    assert native_podgroup_from_api(native("solo", {"basic": {}})).min_member == 1


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"gang": {"minCount": 0}}, "spec.schedulingPolicy.gang.minCount"),
        ({"gang": {"minCount": "4"}}, "spec.schedulingPolicy.gang.minCount"),
        ({"gang": [4]}, "spec.schedulingPolicy.gang"),
        ("gang", "spec.schedulingPolicy"),
    ],
)
def test_a_malformed_policy_is_refused_with_the_field(policy: object, field: str) -> None:
    with pytest.raises(ConvertError, match=field.replace(".", r"\.")):
        native_podgroup_from_api(native("bad", policy))


def test_a_pod_joins_the_group_its_scheduling_group_names() -> None:
    member = pod("w0", {"schedulingGroup": {"podGroupName": "train"}})
    labelled = pod("w1", {}, {"scheduling.x-k8s.io/pod-group": "train"})
    both = pod(
        "w2", {"schedulingGroup": {"podGroupName": "train"}}, {"scheduling.x-k8s.io/pod-group": "other"}
    )
    assert [pod_from_api(p).group for p in (member, labelled, both)] == ["train", "train", "train"]


def test_a_malformed_scheduling_group_is_refused_with_the_field() -> None:
    with pytest.raises(ConvertError, match=r"spec\.schedulingGroup\.podGroupName"):
        pod_from_api(pod("w0", {"schedulingGroup": {"podGroupName": 3}}))


def test_the_status_written_reads_back_as_the_same_phase_and_counts() -> None:
    """The gang pass compares what it would write with what it read: an unchanged gang is not rewritten."""
    members = [a_pod(f"w{i}").gpus(1).on("n1", [i]).phase("Running").group("train").build() for i in range(2)]
    status = gang_status(PodGroup("ml", "train", 2, native=True), members)
    patch = native_status(podgroup_status(status), now=0.0)
    (condition,) = patch["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        GANG_CONDITION,
        "True",
        "Running",
    )
    assert condition["lastTransitionTime"] == "1970-01-01T00:00:00Z"
    read = native_podgroup_from_api(native("train", {"gang": {"minCount": 2}}, conditions=[condition]))
    assert (read.phase, read.counts) == ("Running", (2, 2, 0, 0))


def test_kube_schedulers_own_condition_is_not_read_as_phalanxs() -> None:
    theirs = {"type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable", "message": "x"}
    read = native_podgroup_from_api(native("train", {"gang": {"minCount": 2}}, conditions=[theirs]))
    assert (read.phase, read.counts) == ("", (0, 0, 0, 0))


def test_both_kinds_live_side_by_side_and_each_list_replaces_only_its_own() -> None:
    cache = ClusterCache()
    cache.replace_podgroups([plugins("a", 2)])
    cache.replace_native_podgroups([native("b", {"gang": {"minCount": 3}})])
    cache.replace_podgroups([plugins("a", 5)])
    groups = {g.key: (g.min_member, g.native) for g in cache.podgroups()}
    assert groups == {"ml/a": (5, False), "ml/b": (3, True)}
    assert cache.is_native_group("ml/b") and not cache.is_native_group("ml/a")
    cache.native_podgroup_event("DELETED", native("b", {"gang": {"minCount": 3}}))
    assert [g.key for g in cache.podgroups()] == ["ml/a"]


def test_a_name_both_kinds_use_keeps_the_scheduler_plugins_group_and_refuses_the_native_one() -> None:
    cache = ClusterCache()
    cache.replace_podgroups([plugins("train", 2)])
    cache.native_podgroup_event("ADDED", native("train", {"gang": {"minCount": 8}}))
    cache.native_podgroup_event("ADDED", native("other", {"gang": {"minCount": 3}}))
    assert {g.key: g.min_member for g in cache.podgroups()} == {"ml/other": 3, "ml/train": 2}
    refusal = cache.refusals.standing(NATIVE_PODGROUP, "ml/train")
    assert refusal is not None and "rename one of them" in refusal.reason
    assert (refusal.ref.kind, refusal.ref.api_version) == ("PodGroup", "scheduling.k8s.io/v1alpha2")


def test_a_scheduler_plugins_group_arriving_later_takes_the_name_from_a_native_one() -> None:
    cache = ClusterCache()
    cache.replace_native_podgroups([native("train", {"gang": {"minCount": 8}})])
    cache.podgroup_event("ADDED", plugins("train", 2))
    assert [(g.key, g.native) for g in cache.podgroups()] == [("ml/train", False)]
    assert cache.refusals.standing(NATIVE_PODGROUP, "ml/train") is not None


def test_a_malformed_native_group_is_refused_and_the_others_kept() -> None:
    cache = ClusterCache()
    cache.replace_native_podgroups(
        [native("bad", {"gang": {"minCount": -1}}), native("ok", {"gang": {"minCount": 2}})]
    )
    assert [g.key for g in cache.podgroups()] == ["ml/ok"]
    assert cache.refusals.standing(NATIVE_PODGROUP, "ml/bad") is not None


def test_the_writer_writes_a_native_groups_plan_and_status_on_the_native_object() -> None:
    api = FakeApi(read_only=False)
    writer = PodGroupWriter(api, native=lambda key: key == "ml/n", clock=lambda: 0.0)  # type: ignore[arg-type]
    writer.set_plan("ml", "n", "plan")
    writer.set_plan("ml", "p", "plan")
    writer.set_status(
        "ml", "n", {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0}
    )
    paths = [(s.method, s.path, s.content_type) for s in api.sent]
    assert paths == [
        (
            "PATCH",
            "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml/podgroups/n",
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/p",
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            "/apis/scheduling.k8s.io/v1alpha2/namespaces/ml/podgroups/n/status",
            "application/strategic-merge-patch+json",
        ),
    ]
    status = api.sent[2].body
    assert isinstance(status, dict) and status["status"]["conditions"][0]["status"] == "False"


def test_the_writer_finds_a_native_groups_members_by_their_reference() -> None:
    pods = [
        pod("w0", {"schedulingGroup": {"podGroupName": "n"}}),
        pod("w1", {"schedulingGroup": {"podGroupName": "other"}}),
        pod("w2", {}),
    ]
    api = FakeApi(answer=lambda _sent: {"items": pods})
    writer = PodGroupWriter(api, native=lambda key: key == "ml/n")  # type: ignore[arg-type]
    assert [p.name for p in writer.list_members("ml", "n")] == ["w0"]
    assert api.sent[0].query == {}  # no label selector reaches spec.schedulingGroup


def test_resources_of_a_native_member_are_read_as_any_pods() -> None:
    raw = pod(
        "w0",
        {
            "schedulingGroup": {"podGroupName": "n"},
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
        },
    )
    assert pod_from_api(raw).requests == Resources(gpus=2)


def test_the_scheduler_plugins_reader_is_unchanged() -> None:
    assert not podgroup_from_api(plugins("a", 2)).native
