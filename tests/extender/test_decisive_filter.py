"""Decisive filter: one node for a pod phalanx decides alone, every feasible node for the others."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from extender.app import create_app
from extender.extender_settings import ExtenderSettings
from extender.gang_bind import GangBinder, GangTeller
from extender.ledger import PromiseLedger
from extender.service import Extender
from extender.wire import ranked_path_reason
from kubeio.config import SettingsError
from tests.builders import FakeBinder, FakeCluster, FakePlanWriter, a_gang, a_node, a_pod, members


def raw_pod(name: str, gpus: int, **spec: Any) -> dict[str, Any]:
    """A pod as kube-scheduler sends it in ``ExtenderArgs``."""
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-ml-{name}"}
    if "ownerReferences" in spec:
        meta["ownerReferences"] = spec.pop("ownerReferences")
    return {
        "metadata": meta,
        "spec": {
            "schedulerName": "phalanx",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def cluster() -> FakeCluster:
    return FakeCluster().add(
        a_node("empty").gpus(8).build(),
        a_node("busy").gpus(8).build(),
        a_node("half").gpus(8).build(),
        a_pod("x").gpus(6).on("busy", range(6)).build(),
        a_pod("y").gpus(4).on("half", range(4)).build(),
    )


def post(decisive: bool, pod: dict[str, Any], names: list[str], fake: FakeCluster | None = None) -> Any:
    fake = fake or cluster()
    service = Extender(fake, FakeBinder(fake), clock=lambda: 0.0, promise_ttl=60.0, decisive=decisive)
    registry = CollectorRegistry()
    app = create_app(ExtenderSettings(), service, registry=registry, ready=lambda: True)
    body = {"Pod": pod, "Nodes": None, "NodeNames": names}
    reply = app.test_client().post("/filter", data=orjson.dumps(body))
    assert reply.status_code == 200, reply.data
    paths = {
        s.labels["path"]: s.value
        for m in registry.collect()
        for s in m.samples
        if s.name == "phalanx_extender_filter_answers_total"
    }
    return reply.json, paths


def test_a_pod_on_its_own_gets_only_the_node_phalanx_ranks_first() -> None:
    reply, paths = post(True, raw_pod("p", 1), ["empty", "busy", "half"])
    assert reply["NodeNames"] == ["busy"]  # the fullest node that takes it: packing
    assert paths == {"decisive": 1.0}


def test_turned_off_every_feasible_node_is_sent_for_ranking() -> None:
    reply, paths = post(False, raw_pod("p", 1), ["empty", "busy", "half"])
    assert reply["NodeNames"] == ["empty", "busy", "half"]
    assert paths == {"ranked": 1.0}


def test_the_decisive_node_is_the_one_prioritize_scores_highest() -> None:
    fake = cluster()
    service = Extender(fake, FakeBinder(fake), clock=lambda: 0.0, promise_ttl=60.0, decisive=True)
    app = create_app(ExtenderSettings(), service, registry=CollectorRegistry(), ready=lambda: True)
    body = orjson.dumps({"Pod": raw_pod("p", 2), "Nodes": None, "NodeNames": ["empty", "busy", "half"]})
    chosen: list[str] = orjson.loads(app.test_client().post("/filter", data=body).data)["NodeNames"]
    ranked: list[dict[str, Any]] = orjson.loads(app.test_client().post("/prioritize", data=body).data)
    scores = {e["Host"]: e["Score"] for e in ranked}
    assert chosen == [max(scores, key=lambda n: scores[n])]


def test_a_pod_no_node_takes_still_gets_every_reason() -> None:
    reply, paths = post(True, raw_pod("p", 3), ["busy"])
    assert reply["NodeNames"] == []
    assert set(reply["FailedNodes"]) == {"busy"}
    assert paths == {"none": 1.0}


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (
            {
                "affinity": {
                    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}
                }
            },
            "preferred node affinity",
        ),
        (
            {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]}}},
            "preferred podAntiAffinity",
        ),
        (
            {"topologySpreadConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
            "ScheduleAnyway topology spread",
        ),
        (
            {"ownerReferences": [{"kind": "ReplicaSet", "name": "r", "uid": "u", "apiVersion": "apps/v1"}]},
            "default spreading of a ReplicaSet's pods",
        ),
    ],
)
def test_pods_with_preferences_phalanx_does_not_model_keep_the_ranked_path(
    spec: dict[str, Any], reason: str
) -> None:
    pod = raw_pod("p", 1, **spec)
    assert ranked_path_reason(pod) == reason
    reply, paths = post(True, pod, ["empty", "busy", "half"])
    assert reply["NodeNames"] == ["empty", "busy", "half"]
    assert paths == {"ranked": 1.0}


def test_required_terms_and_hard_spread_do_not_need_ranking() -> None:
    pod = raw_pod(
        "p",
        1,
        topologySpreadConstraints=[{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
        ownerReferences=[{"kind": "ReplicaSet", "name": "r", "uid": "u", "apiVersion": "apps/v1"}],
        affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}},
    )
    assert ranked_path_reason(pod) == ""  # explicit constraints replace the default spreading


def gang_extender(fake: FakeCluster, *, decisive: bool) -> Extender:
    binder, ledger = FakeBinder(fake), PromiseLedger()
    teller = GangTeller(None, None, lambda: 0.0)
    gangs = GangBinder(
        fake.snapshot,
        ledger,
        FakePlanWriter(fake),
        binder.bind,
        clock=lambda: 0.0,
        teller=teller,
        node_gone=binder.node_gone,
    )
    return Extender(
        fake, binder, clock=lambda: 0.0, promise_ttl=60.0, gangs=gangs, ledger=ledger, decisive=decisive
    )


def test_a_gang_member_gets_its_reserved_node_as_before() -> None:
    gang = members("g", 2, 1)
    names = ("empty", "busy", "half")
    decided = [
        [
            gang_extender(cluster().add(a_gang("g", 2), *gang), decisive=d).filter(m, names).feasible
            for m in gang
        ]
        for d in (True, False)
    ]
    assert decided[0] == decided[1]
    assert all(len(f) == 1 for f in decided[0])


def test_the_setting_reads_true_and_false_and_refuses_other_words() -> None:
    assert ExtenderSettings.from_env({}).decisive is True
    assert ExtenderSettings.from_env({"PHALANX_DECISIVE": "false"}).decisive is False
    with pytest.raises(SettingsError, match="PHALANX_DECISIVE"):
        ExtenderSettings.from_env({"PHALANX_DECISIVE": "sometimes"})
