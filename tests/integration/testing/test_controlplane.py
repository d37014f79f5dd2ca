"""The test control plane is a real API server: it validates, versions and serves."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from testworld.controlplane import ControlPlane


async def test_api_server_reports_the_version_it_was_built_as(api_client: Any) -> None:
    info = await client.VersionApi(api_client).get_code()
    assert info.major == "1"
    assert info.git_version.startswith("v1.")
    assert info.git_version != "v0.0.0-master+$Format:%H$"


async def test_namespace_fixture_gives_an_empty_namespace(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    ns = await core.read_namespace(namespace)
    assert ns.status.phase == "Active"
    pods = await core.list_namespaced_pod(namespace)
    assert pods.items == []


async def test_server_rejects_an_invalid_object(api_client: Any, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    with pytest.raises(client.ApiException) as err:
        await core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "Not_A_Valid_Name"}, "data": {}}
        )
    assert err.value.status == 422


def test_compaction_advances_the_compacted_revision(control_plane: ControlPlane) -> None:
    first = control_plane.compact_etcd()
    second = control_plane.compact_etcd()
    assert second > first > 0
