"""A RunnerSet pod is held until the runner its container restarted is unregistered (B5).

A RunnerSet's pod has restartPolicy Always: after an ephemeral runner finishes its job and
exits (de-registering itself), the kubelet starts the container again and the new runner
registers under the pod's name with a new id. When the pod is deleted meanwhile, graceful
stop sees the exit that came before the deletion and trusts it (rule 6), yet the name is
registered again. Clean-clone CI left such runners registered after a RunnerSet's deletion
(tests/realnode/test_realnode_legacy_runnerset.py). Here the kubelet's part is played by
hand, so the order that real node hit only sometimes happens every time.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _legacy_runner_world import World, until, world_fixture

from gharc.api.legacy import constants as c
from gharc.controllers.legacy.githubclients import LegacyGitHub
from gharc.controllers.legacy.pods import RunnerPods
from gharc.controllers.legacy.runnerpod import RunnerPodReconciler
from gharc.kube import errors as kerrors
from gharc.kube import objects
from gharc.kube.reconcile import Request
from gharc.kube.resources import PODS
from testworld.sim.github import DEFAULT_ORG

pytestmark = pytest.mark.cluster

NAME = "rs-abcde-0"


@pytest.fixture
async def world(kubeconfig: str, namespace: str, api_client: Any) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace, api_client):
        yield w


async def _runner_set_pod(world: World) -> dict[str, Any]:
    """A RunnerSet-like pod (restartPolicy Always) whose runner exited after its job.

    The pod spec is a real runner pod's (its env names the GitHub scope); no controller or
    kubelet runs, so only this test writes the pod and its status.
    """
    await world.create_deployment(replicas=1)
    [template] = await world.wait_registered(1)
    for ctl in world.controllers:
        await ctl.stop()
    await asyncio.gather(*world.tasks)
    world.controllers, world.tasks = [], []
    assert world.kubelet is not None
    await world.kubelet.stop()
    world.kubelet = None

    spec = copy.deepcopy(template["spec"])
    spec["restartPolicy"] = "Always"
    labels = {**template["metadata"].get("labels", {}), c.LABEL_RUNNER_SET_NAME: "rs"}
    pod = await world.kube.create(
        PODS,
        {
            "metadata": {
                "name": NAME,
                "namespace": world.namespace,
                "labels": labels,
                # the first registration, removed by the runner itself after its job
                "annotations": {c.ANNOTATION_RUNNER_ID: "999999"},
                "finalizers": [c.FINALIZER_RUNNER_POD],
            },
            "spec": spec,
        },
    )
    exited = objects.format_time(dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1))
    runner = {
        "name": c.CONTAINER_RUNNER,
        "ready": False,
        "restartCount": 0,
        "image": "runner",
        "imageID": "",
        "state": {"terminated": {"exitCode": 0, "startedAt": exited, "finishedAt": exited}},
    }
    return await world.kube.patch_status(
        PODS, pod, {"status": {"phase": "Running", "containerStatuses": [runner]}}
    )


async def test_a_runner_set_pod_is_held_until_its_restarted_runner_is_removed(
    world: World,
) -> None:
    pod = await _runner_set_pod(world)
    tenant = world.gh.state.tenant_for("org", DEFAULT_ORG)
    world.gh.state.register_static_runner(tenant, NAME, ["linux"])  # the restarted runner

    def registered() -> list[str]:
        return [r.name for r in world.gh.state.runners.values() if r.name == NAME]

    await world.kube.delete(PODS, pod)
    deleting = await world.kube.get(PODS, NAME, namespace=world.namespace)
    deadline = objects.deleting_since(deleting)
    assert deadline is not None
    assert world.cache is not None
    # Seconds into the deletion's grace period: the kubelet has not reported yet.
    options = dataclasses.replace(world.options, clock=lambda: deadline - dt.timedelta(seconds=20))
    github = LegacyGitHub(world.kube, world.pool, options.github_url, options.credentials)
    reconciler = RunnerPodReconciler(
        world.kube, world.cache, RunnerPods(world.cache), github, options, None
    )
    request = Request(world.namespace, NAME)

    async def unregistration_complete() -> dict[str, Any] | None:
        await reconciler.reconcile(request)
        live = await world.kube.get(PODS, NAME, namespace=world.namespace)
        annotations = live["metadata"].get("annotations") or {}
        return live if c.ANNOTATION_UNREGISTRATION_COMPLETE_TIMESTAMP in annotations else None

    # The exit came before the deletion, so graceful stop removes nothing (rule 6)...
    await until(unregistration_complete, timeout=30, message="graceful stop ran")
    await reconciler.reconcile(request)
    # ...but the kubelet may still start the container again: the pod is held.
    live = await world.kube.get(PODS, NAME, namespace=world.namespace)
    assert objects.has_finalizer(live, c.FINALIZER_RUNNER_POD)
    assert registered() == [NAME] and world.remove_calls() == 0

    # The kubelet stopped the pod for its deletion: a terminal phase, nothing restarts.
    await world.kube.patch_status(PODS, live, {"status": {"phase": "Failed"}})

    async def released() -> bool | None:
        # With no kubelet to confirm the deletion the pod stays, without our finalizer.
        try:
            live = await world.kube.get(PODS, NAME, namespace=world.namespace)
        except kerrors.NotFound:
            return True
        if not objects.has_finalizer(live, c.FINALIZER_RUNNER_POD):
            return True
        await reconciler.reconcile(request)
        return None

    await until(released, timeout=30, message="the pod's finalizer released")
    assert registered() == []
    assert world.remove_calls(status=204) == 1
