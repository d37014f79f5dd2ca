"""Fixtures for gharc.kube against the real API server: a KubeClient and a tiny test CRD."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.resources import CUSTOM_RESOURCE_DEFINITIONS, Resource
from testworld import wait

WIDGETS = Resource.custom("test.gharc.dev", "v1", "Widget")

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.test.gharc.dev"},
    "spec": {
        "group": "test.gharc.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {"size": {"type": "integer"}},
                            },
                            "status": {
                                "type": "object",
                                "properties": {"phase": {"type": "string"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


@pytest.fixture(params=["aiohttp", "httpx"])
async def kube(
    api_client: Any, kubeconfig: str, request: pytest.FixtureRequest
) -> AsyncIterator[KubeClient]:
    """A KubeClient over each transport: the test's ApiClient (aiohttp, which the fixture
    closes), and the lean httpx transport the pod listener uses, so every behaviour here
    holds for both."""
    if request.param == "aiohttp":
        yield KubeClient(api_client)
        return
    kube = await KubeClient.from_config(kubeconfig=kubeconfig, lean=True)
    assert type(kube.transport).__name__ == "HttpxTransport"
    try:
        yield kube
    finally:
        await kube.close()


@pytest.fixture
async def widgets(kube: KubeClient) -> Resource:
    """The Widget CRD (with a status subresource), created once and Established."""
    try:
        await kube.create(CUSTOM_RESOURCE_DEFINITIONS, WIDGET_CRD)
    except kerrors.AlreadyExists:
        pass
    for _ in range(200):
        crd = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, "widgets.test.gharc.dev")
        conditions = (crd.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            # Discovery and the handler can lag Established briefly; probe the endpoint.
            await kube.list(WIDGETS, namespace="default")
            return WIDGETS
        await asyncio.sleep(0.05)
    raise AssertionError("widget CRD not Established")


Eventually = Callable[..., Awaitable[None]]


@pytest.fixture
def eventually() -> Eventually:
    """``await eventually(lambda: cond, timeout=10)``: :func:`testworld.wait.eventually`
    with a short interval, as these tests wait on in-process informers, not on a cluster."""
    return functools.partial(wait.eventually, interval=0.02)
