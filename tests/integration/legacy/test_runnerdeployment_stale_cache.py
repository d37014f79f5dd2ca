"""RunnerDeployment: one RunnerReplicaSet per template, even when the cache lags.

The reconciler reads RunnerReplicaSets from the informer cache. A spec change (the
autoscaler writing ``effectiveTime`` right after the deployment was created) can wake it
before the cache shows the replica set it has just created; acting on that view made a
second replica set of the same template, and two sets of runners raced for one job.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest

from gharc.api.legacy import constants as c
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS
from gharc.controllers.legacy.options import LegacyOptions
from gharc.controllers.legacy.runnerdeployment import RunnerDeploymentReconciler
from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.reconcile import Request
from gharc.kube.resources import Resource

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]


class LaggingCache:
    """A cache that shows only the objects it was given, whatever the server holds now."""

    def __init__(self, *objects: JSON) -> None:
        self.objects = [copy.deepcopy(o) for o in objects]

    async def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JSON:
        for obj in self.objects:
            if obj["kind"] == resource.kind and obj["metadata"]["name"] == name:
                return copy.deepcopy(obj)
        raise kerrors.NotFound(f"{resource.kind} {name} not found")

    async def list(self, resource: Resource, *, namespace: str | None = None) -> list[JSON]:
        return [copy.deepcopy(o) for o in self.objects if o["kind"] == resource.kind]


@pytest.fixture
async def kube(kubeconfig: str) -> AsyncIterator[KubeClient]:
    client = await KubeClient.from_config(kubeconfig=kubeconfig)
    try:
        yield client
    finally:
        await client.close()


def reconciler(kube: KubeClient, cache: LaggingCache) -> RunnerDeploymentReconciler:
    options = LegacyOptions(github_url="http://127.0.0.1:1")
    return RunnerDeploymentReconciler(kube, cache, options, None, None)


async def test_a_lagging_cache_does_not_create_a_second_replica_set(
    kube: KubeClient, namespace: str
) -> None:
    rd = await kube.create(
        RUNNER_DEPLOYMENTS,
        {
            "metadata": {"name": "rd", "namespace": namespace},
            "spec": {"replicas": 1, "template": {"spec": {"organization": "octo-org"}}},
        },
    )
    rd["kind"] = RUNNER_DEPLOYMENTS.kind
    deployments = reconciler(kube, LaggingCache(rd))
    request = Request(namespace, "rd")

    await deployments.reconcile(request)
    # The autoscaler's write wakes the reconciler; the cache still lacks the replica set.
    result = await deployments.reconcile(request)

    sets = await kube.list(RUNNER_REPLICA_SETS, namespace=namespace)
    assert len(sets) == 1, [s["metadata"]["name"] for s in sets]
    assert result is not None and result.requeue_after, "waits for the cache, with a bound"

    # Once the cache shows it, the reconciler goes on with that one replica set.
    [made] = sets
    made["kind"] = RUNNER_REPLICA_SETS.kind
    deployments.cache = LaggingCache(rd, made)
    await deployments.reconcile(request)
    assert len(await kube.list(RUNNER_REPLICA_SETS, namespace=namespace)) == 1
    assert c.LABEL_RUNNER_TEMPLATE_HASH in made["metadata"]["labels"]
