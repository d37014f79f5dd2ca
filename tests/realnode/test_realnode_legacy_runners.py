"""Legacy RunnerDeployment -> RunnerReplicaSet -> Runner -> pod on a real node, where the
garbage collector, not the Runner controller, deletes a deleted Runner's pod and
registration Secret (as in ARC: the Runner finalizer is removed at once, legacy.md 4.4).

The envtest tier (tests/integration/legacy/test_runnerdeployment_lifecycle.py and
test_runner_registration.py) checks which Runner the controllers delete and that its pod
and Secret are owned by it; this checks that they then really go, each pod through its
finalizer: a drained static runner (one RemoveRunner), a completed ephemeral runner
(replaced, no RemoveRunner), and the whole RunnerDeployment deleted (its idle runners
unregistered).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_node import LegacyNode, legacy_node

from gharc.api.legacy import constants as lc
from gharc.api.resources import RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS, RUNNERS
from gharc.kube.client import KubeClient
from gharc.kube.resources import PODS, SECRETS
from testworld.realnode import RealCluster
from testworld.realnode_image import RUNNER_IMAGE
from testworld.sim.github import DEFAULT_REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


@pytest.fixture
async def node(real_cluster: RealCluster, kube: KubeClient) -> AsyncIterator[LegacyNode]:
    async for n in legacy_node(real_cluster, kube, "legacy-rd"):
        yield n


def deployment(namespace: str, name: str, replicas: int, *, ephemeral: bool) -> dict[str, Any]:
    return {
        "apiVersion": lc.API_VERSION,
        "kind": lc.KIND_RUNNER_DEPLOYMENT,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "repository": DEFAULT_REPO,
                    "labels": [name],
                    "ephemeral": ephemeral,
                    "dockerEnabled": False,
                    "image": RUNNER_IMAGE,
                    "imagePullPolicy": "Never",
                }
            },
        },
    }


async def test_the_garbage_collector_takes_a_deleted_runners_pod_and_secret(
    node: LegacyNode,
) -> None:
    kube, ns = node.kube, node.namespace
    await kube.create(RUNNER_DEPLOYMENTS, deployment(ns, "static", 2, ephemeral=False))
    await kube.create(RUNNER_DEPLOYMENTS, deployment(ns, "eph", 1, ephemeral=True))
    static = await node.wait_for("2 static runners", lambda: node.registered_pods(2, "static"))
    [eph] = await node.wait_for("1 ephemeral runner", lambda: node.registered_pods(1, "eph"))
    for pod in [*static, eph]:
        name = pod["metadata"]["name"]
        runner = await kube.get(RUNNERS, name, namespace=ns)
        secret = await kube.get(SECRETS, f"{name}-registration", namespace=ns)
        for owned in (pod, secret):
            [ref] = owned["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["uid"]) == ("Runner", runner["metadata"]["uid"])

    # Scale down: the oldest static runner is drained (RemoveRunner), its Runner deleted,
    # and its pod and Secret follow through the garbage collector.
    # NB: "oldest" as the controller orders them (the Runner's creationTimestamp, then its
    # name), not the API's list order (by name): two Runners made a second apart came out
    # the other way round.
    runners = [await kube.get(RUNNERS, p["metadata"]["name"], namespace=ns) for p in static]
    runners.sort(key=lambda r: (r["metadata"]["creationTimestamp"], r["metadata"]["name"]))
    oldest, newest = (r["metadata"]["name"] for r in runners)
    await kube.merge_patch(RUNNER_DEPLOYMENTS, "static", {"spec": {"replicas": 1}}, namespace=ns)

    async def drained() -> bool:
        left = {r: await node.names(r) for r in (RUNNERS, PODS, SECRETS)}
        return all(oldest not in names and f"{oldest}-registration" not in names
                   for names in left.values()) and newest in left[PODS]  # fmt: skip

    await node.wait_for("the drained runner's Runner, pod and Secret gone", drained, 120)
    assert node.remove_calls(status=204) == 1
    assert oldest not in {r.name for r in node.gh.state.runners.values()}

    # An ephemeral runner's job ends, the runner exits: its Runner is deleted and the
    # garbage collector takes the pod; a fresh runner replaces it, with no RemoveRunner.
    first = eph["metadata"]["name"]
    removes = node.remove_calls()
    job = node.gh.state.enqueue_job(DEFAULT_REPO, ["eph"], duration=1.0)
    await node.wait_for(
        "the job done", lambda: asyncio.sleep(0, result=job.status == "completed"), 120
    )
    assert job.runner_name == first

    async def replaced() -> bool:
        names = await node.names(PODS) | await node.names(SECRETS)
        fresh = await node.registered_pods(1, "eph")
        return first not in names and f"{first}-registration" not in names and bool(fresh)

    await node.wait_for("the completed runner's pod gone, a fresh one registered", replaced)
    assert node.remove_calls() == removes, "a finished ephemeral runner needs no RemoveRunner"

    # Deleting the RunnerDeployments takes everything, and unregisters the idle runners.
    for name in ("static", "eph"):
        await kube.delete(RUNNER_DEPLOYMENTS, name, namespace=ns)

    async def all_gone() -> bool:
        kinds = (RUNNER_DEPLOYMENTS, RUNNER_REPLICA_SETS, RUNNERS, PODS)
        secrets = [s for s in await node.names(SECRETS) if s.endswith("-registration")]
        return not secrets and not any([await node.names(r) for r in kinds])

    await node.wait_for("everything of both deployments gone", all_gone, 180)
    await node.wait_for(
        "the runners unregistered in GitHub",
        lambda: asyncio.sleep(0, result=not node.gh.state.runners),
        60,
    )
