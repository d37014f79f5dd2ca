"""Shared fixtures: one real control plane per test session, a namespace per test."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from testworld.controlplane import ControlPlane, install_crds_sync, running_control_plane

log = logging.getLogger("gharc.tests")

#: Reports which facts of the real GitHub each scenario relies on (testworld/contract.py).
pytest_plugins = ["testworld.contract"]


def _gharc_crds() -> list[dict[str, Any]]:
    """Every CRD gharc ships, or none while the API package does not provide them yet."""
    try:
        from gharc.api import crds
    except ImportError:
        return []
    load = getattr(crds, "load", None)
    return list(load("all")) if load else []


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """A real etcd + kube-apiserver for the whole run, with gharc's CRDs installed."""
    with running_control_plane() as cp:
        crds = _gharc_crds()
        if crds:
            install_crds_sync(cp.kubeconfig_path, crds)
        log.warning(
            "control plane started in %.2f s (%s), %d CRDs installed",
            cp.startup_seconds,
            cp.server_url,
            len(crds),
        )
        yield cp


@pytest.fixture
def kubeconfig(control_plane: ControlPlane) -> str:
    """Path of an admin (system:masters) kubeconfig for the test control plane."""
    return control_plane.kubeconfig_path


@pytest.fixture
async def api_client(kubeconfig: str) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ApiClient bound to the test's event loop."""
    from kubernetes_asyncio import client, config

    cfg = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        yield api


@pytest.fixture
async def namespace(api_client: Any, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    """A fresh namespace per test; deleted afterwards (it stays Terminating: no GC here)."""
    from kubernetes_asyncio import client

    base = request.node.name.lower().replace("_", "-")
    base = "".join(c for c in base if c.isalnum() or c == "-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    await core.create_namespace({"metadata": {"name": name}})
    yield name
    try:
        await core.delete_namespace(name)
    except client.ApiException as err:
        if err.status != 404:
            raise
