from __future__ import annotations

from typing import Any

import pytest

from kubeio.convert import ConvertError
from kubeio.node_pods import node_pod_from_api


def container(name: str, gpus: int | None, **extra: Any) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus is not None else {}
    return {"name": name, "resources": {"limits": limits}, **extra}


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": "p", "uid": "u1", "annotations": {"phalanx.io/gpus": "3,1"}},
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def test_gpu_containers_in_the_kubelets_order_and_those_podresources_lists() -> None:
    raw = pod(
        initContainers=[container("setup", 1), container("sidecar", 2, restartPolicy="Always")],
        containers=[container("main", 4), container("log", None)],
    )
    converted = node_pod_from_api(raw, order=7)
    assert converted.sizes == (1, 2, 4)
    assert dict(converted.listed) == {"sidecar": 2, "main": 4}
    assert (converted.key, converted.annotated, converted.order) == ("ns/p", (1, 3), 7)
    assert converted.live


def test_a_finished_pod_is_not_live() -> None:
    raw = pod(containers=[container("main", 1)])
    raw["status"]["phase"] = "Succeeded"
    assert not node_pod_from_api(raw).live


def test_a_malformed_pod_is_refused_with_the_field() -> None:
    with pytest.raises(ConvertError, match=r"spec\.containers"):
        node_pod_from_api(pod(containers="main"))
