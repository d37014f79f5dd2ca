"""A legacy RunnerSet on a real node, with the real StatefulSet controller and garbage
collector, as in production (gharc has no stand-in for either).

The envtest tier (tests/integration/legacy/test_runnerset_lifecycle.py) checks the
StatefulSets the RunnerSet controller writes; what needs the StatefulSet controller is
checked here: their pods and the PVCs of ``volumeClaimTemplates``, the RunnerSet status
that follows the StatefulSets' status, scale down draining a runner (one RemoveRunner),
jobs run by the pods, and deleting the RunnerSet taking the StatefulSets and pods with it
through ownerReferences alone while the runners are unregistered.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_node import LegacyNode, legacy_node

from gharc.api.resources import RUNNER_SETS
from gharc.controllers.legacy.runnerset import PERSISTENT_VOLUME_CLAIMS, STATEFUL_SETS
from gharc.kube.client import KubeClient
from gharc.kube.resources import PODS, Resource
from testworld import legacy
from testworld.realnode import RealCluster
from testworld.realnode_image import RUNNER_IMAGE
from testworld.sim.github import DEFAULT_REPO

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

LABEL = "realnode"
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "StorageClass", "storageclasses", False)
PERSISTENT_VOLUMES = Resource("", "v1", "PersistentVolume", "persistentvolumes", False)


@pytest.fixture
async def node(real_cluster: RealCluster, kube: KubeClient) -> AsyncIterator[LegacyNode]:
    async for n in legacy_node(real_cluster, kube, "legacy-rs"):
        yield n


def runner_set(namespace: str, replicas: int, *, ephemeral: bool = True) -> dict[str, Any]:
    runner = {"name": "runner", "image": RUNNER_IMAGE, "imagePullPolicy": "Never"}
    return legacy.runner_set(
        namespace, replicas, [runner], ephemeral=ephemeral, labels=[LABEL], dockerEnabled=False
    )


async def delete_and_wait_all_gone(node: LegacyNode) -> None:
    """Delete the RunnerSet: its StatefulSets and pods must follow through ownerReferences
    alone (the garbage collector), and every runner must be unregistered at GitHub."""
    await node.kube.delete(RUNNER_SETS, "rs", namespace=node.namespace)

    async def all_gone() -> bool:
        return not any([await node.names(r) for r in (RUNNER_SETS, STATEFUL_SETS, PODS)])

    await node.wait_for("the RunnerSet, its StatefulSets and pods gone", all_gone, 180)
    await node.wait_for(
        "the runners unregistered in GitHub",
        lambda: asyncio.sleep(0, result=not node.gh.state.runners),
        60,
    )


async def test_runner_set_on_the_real_statefulset_controller(node: LegacyNode) -> None:
    await node.kube.create(RUNNER_SETS, runner_set(node.namespace, 2))
    pods = await node.wait_for("2 registered runner pods", lambda: node.registered_pods(2))
    for pod in pods:
        owners = {o["kind"] for o in pod["metadata"].get("ownerReferences") or []}
        assert owners == {"StatefulSet"}, owners  # made by the real controller

    async def status() -> bool:
        rs = await node.kube.get(RUNNER_SETS, "rs", namespace=node.namespace)
        st = rs.get("status") or {}
        return (st.get("readyReplicas"), st.get("desiredReplicas")) == (2, 2)

    await node.wait_for("the RunnerSet status: 2 ready of 2", status, 60)

    jobs = [node.gh.state.enqueue_job(DEFAULT_REPO, [LABEL], duration=1.0) for _ in range(2)]

    async def done() -> bool:
        return all(j.status == "completed" for j in jobs)

    await node.wait_for("2 jobs completed by the legacy runners", done, 180)
    assert {j.runner_name for j in jobs} <= {p["metadata"]["name"] for p in pods} | {
        p["metadata"]["name"] for p in await node.kube.list(PODS, namespace=node.namespace)
    }
    await delete_and_wait_all_gone(node)


async def test_volume_claims_and_scale_down_on_the_real_statefulset_controller(
    node: LegacyNode,
) -> None:
    """One PVC set per runner from ``volumeClaimTemplates`` (bound to static volumes, as
    the node has no provisioner), and scale down 2 -> 1 draining one idle static runner."""
    kube, ns = node.kube, node.namespace
    sc = f"gharc-{uuid.uuid4().hex[:6]}"
    await kube.create(
        STORAGE_CLASSES,
        {
            "metadata": {"name": sc},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "Immediate",
            "reclaimPolicy": "Retain",
        },
    )
    for i in range(2):
        await kube.create(
            PERSISTENT_VOLUMES,
            {
                "metadata": {"name": f"{sc}-{i}"},
                "spec": {
                    "storageClassName": sc,
                    "capacity": {"storage": "10Mi"},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": f"/tmp/{sc}-{i}", "type": "DirectoryOrCreate"},
                },
            },
        )
    try:
        body = runner_set(ns, 2, ephemeral=False)
        body["spec"]["volumeClaimTemplates"] = [
            {
                "metadata": {"name": "work"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "10Mi"}},
                    "storageClassName": sc,
                },
            }
        ]
        await kube.create(RUNNER_SETS, body)
        pods = await node.wait_for("2 registered runner pods", lambda: node.registered_pods(2))
        claims = {pvc["metadata"]["name"]: pvc for pvc in await node.live(PERSISTENT_VOLUME_CLAIMS)}
        for pod in pods:
            name = pod["metadata"]["name"]
            [vol] = [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v]
            assert vol == {"name": "work", "persistentVolumeClaim": {"claimName": f"work-{name}"}}
            assert claims[f"work-{name}"]["status"]["phase"] == "Bound"

        async def ready() -> bool:
            rs = await kube.get(RUNNER_SETS, "rs", namespace=ns)
            return ((rs.get("status") or {}).get("readyReplicas"), len(node.gh.state.runners)) == (
                2,
                2,
            )

        await node.wait_for("2 ready, 2 runners at GitHub", ready, 60)
        await kube.merge_patch(RUNNER_SETS, "rs", {"spec": {"replicas": 1}}, namespace=ns)

        async def one() -> bool:
            sets, pod_names = await node.names(STATEFUL_SETS), await node.names(PODS)
            return len(sets) == 1 and len(pod_names) == 1 and len(node.gh.state.runners) == 1

        await node.wait_for("scale down to one StatefulSet, pod and runner", one, 120)
        assert node.remove_calls(status=204) == 1
        [kept] = await node.live(PODS)
        assert kept["metadata"]["name"] in {p["metadata"]["name"] for p in pods}
        assert [r.name for r in node.gh.state.runners.values()] == [kept["metadata"]["name"]]
        await delete_and_wait_all_gone(node)
    finally:
        for i in range(2):
            await kube.delete(PERSISTENT_VOLUMES, f"{sc}-{i}", missing_ok=True)
        await kube.delete(STORAGE_CLASSES, sc, missing_ok=True)
