"""The checked-in protobuf modules are exactly what ``hack/protos`` makes from the ``.proto`` files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubeio.kubeletapi import deviceplugin_v1beta1_pb2 as dp
from kubeio.kubeletapi import podresources_v1_pb2 as pr
from tests.conftest import REPO

API = REPO / "kubeio" / "kubeletapi"
PROTOS = sorted(API.glob("*.proto"))


@pytest.mark.parametrize("proto", PROTOS, ids=[p.name for p in PROTOS])
def test_generated_modules_match_their_proto(proto: Path, tmp_path: Path) -> None:
    shutil.copy(proto, tmp_path / proto.name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{tmp_path}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            proto.name,
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    for suffix in ("_pb2.py", "_pb2.pyi"):
        name = proto.stem + suffix
        assert (tmp_path / name).read_text() == (API / name).read_text(), f"{name} is stale: run hack/protos"


def test_the_wire_names_are_the_kubelets() -> None:
    """The full method names the kubelet dials, and field numbers it encodes (v1beta1, podresources v1)."""
    service = dp.DESCRIPTOR.services_by_name["DevicePlugin"]
    assert service.full_name == "v1beta1.DevicePlugin"
    assert [m.name for m in service.methods] == [
        "GetDevicePluginOptions",
        "ListAndWatch",
        "GetPreferredAllocation",
        "Allocate",
        "PreStartContainer",
    ]
    assert dp.DESCRIPTOR.services_by_name["Registration"].full_name == "v1beta1.Registration"
    assert pr.DESCRIPTOR.services_by_name["PodResourcesLister"].full_name == "v1.PodResourcesLister"
    request = dp.ContainerPreferredAllocationRequest.DESCRIPTOR.fields_by_name
    assert {n: f.number for n, f in request.items()} == {
        "available_deviceIDs": 1,
        "must_include_deviceIDs": 2,
        "allocation_size": 3,
    }
    devices = pr.ContainerDevices.DESCRIPTOR.fields_by_name
    assert {n: f.number for n, f in devices.items()} == {"resource_name": 1, "device_ids": 2, "topology": 3}
