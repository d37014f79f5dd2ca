"""Upgrades without deleting CRDs or scale sets (G20, ARC #4147), on the real API server.

An older gharc installed the AutoscalingRunnerSet CRD without the fields added since
(``burst``, ``scheduledOverrides``): a scale set is created and reconciled under it. The
upgrade applies the current CRDs over it (an additive schema change: same version, new
optional fields, nothing converted) and starts a controller with a new image. The live
objects still read, update and delete; the new controller adopts them without creating
the scale set at GitHub again, and the listener pod moves to the controller's new image.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _arsworld import World, create_github_secret
from prometheus_client import CollectorRegistry

from gharc.api import crds
from gharc.api.resources import AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.controllers.main import ControllerArgs, run_controller
from gharc.kube import errors as kerrors
from gharc.kube.client import KubeClient
from gharc.kube.resources import CUSTOM_RESOURCE_DEFINITIONS
from testworld.sim.github import FakeGitHubServer
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
ARS_CRD = "autoscalingrunnersets.actions.github.com"
#: Spec fields gharc added to the AutoscalingRunnerSet after its first release.
NEW_FIELDS = ("burst", "scheduledOverrides")
SCALE_SET_CREATE = "*/runnerscalesets"


def current_crd() -> JSON:
    return next(crd for crd in crds.load() if crd["metadata"]["name"] == ARS_CRD)


def older_crd() -> JSON:
    """The AutoscalingRunnerSet CRD of an older release: the same version without the
    spec fields added since (what an upgrade must add without deleting anything)."""
    crd = copy.deepcopy(current_crd())
    for version in crd["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        for name in NEW_FIELDS:
            spec["properties"].pop(name, None)
    return crd


async def install_crd(kube: KubeClient, crd: JSON) -> None:
    """Replace the CRD in place (as ``helm upgrade`` / ``kubectl apply`` do, never deleting
    it) and wait until the API server serves the new schema."""
    live = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, ARS_CRD)
    body = copy.deepcopy(crd)
    body["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    await kube.update(CUSTOM_RESOURCE_DEFINITIONS, body)

    async def served() -> bool:
        got = await kube.get(CUSTOM_RESOURCE_DEFINITIONS, ARS_CRD)
        conds = {x["type"]: x["status"] for x in got.get("status", {}).get("conditions", [])}
        return conds.get("Established") == "True" and got["metadata"].get("generation") == got.get(
            "status", {}
        ).get("observedGeneration", got["metadata"].get("generation"))

    await eventually(served, timeout=20, message="CRD established")
    await asyncio.sleep(1.0)  # the API server swaps its schema validators asynchronously


@contextlib.asynccontextmanager
async def controller(
    kubeconfig: str, namespace: str, gh: FakeGitHubServer, kube: KubeClient, image: str
) -> AsyncIterator[World]:
    """``gharc controller`` of one release (its image is the listeners' image)."""
    args = ControllerArgs(
        auto_scaling_runner_set_only=True,
        controller_namespace=namespace,
        watch_namespace=namespace,
        metrics_addr="0",
        kubeconfig=kubeconfig,
        k8s_client_qps=0,
        listener_image=image,
        listener_mode="Pod",
    )
    holder: list[Any] = []
    task = asyncio.create_task(
        run_controller(
            args, on_manager=holder.append, handle_signals=False, registry=CollectorRegistry()
        )
    )

    async def ready() -> bool:
        if task.done():
            task.result()
        return bool(holder) and await holder[0].wait_started(0.01)

    try:
        await eventually(ready, timeout=30, message="manager started")
        yield World(kube=kube, gh=gh, namespace=namespace, manager=holder[0])
    finally:
        if holder:
            holder[0].stop()
        await asyncio.wait_for(task, 30)


async def _settled(world: World) -> tuple[JSON, JSON, JSON]:
    """The ARS with its scale set id, its EphemeralRunnerSet and listener pod."""

    async def probe() -> tuple[JSON, JSON] | None:
        ars = await world.ars()
        ers = await world.ers()
        has_id = (ars["metadata"].get("annotations") or {}).get(c.ANNOTATION_RUNNER_SCALE_SET_ID)
        return (ars, ers) if has_id and ers else None

    settled = await eventually(probe, timeout=30, message="scale set reconciled")
    assert settled is not None
    ars, ers = settled
    pod = await world.wait_listener_pod(ars)
    return ars, ers, pod


async def test_upgrade_keeps_scale_sets_and_moves_listener_image(
    kubeconfig: str, namespace: str
) -> None:
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    try:
        async with FakeGitHubServer(port=0, poll_timeout=1.0) as gh:
            await create_github_secret(kube, namespace, gh.token)
            await install_crd(kube, older_crd())
            try:
                # -- the older release -----------------------------------------------------
                async with controller(kubeconfig, namespace, gh, kube, "gharc:0.1") as old:
                    await old.create_ars("arc", maxRunners=3)
                    ars, ers, pod = await _settled(old)
                    assert pod["spec"]["containers"][0]["image"] == "gharc:0.1"
                    # Its schema has no burst: the API server prunes the unknown field.
                    await kube.patch(
                        AUTOSCALING_RUNNER_SETS, ars, {"spec": {"burst": {"runners": 2}}}
                    )
                    assert "burst" not in (await old.ars())["spec"]
                scale_set_id = ars["metadata"]["annotations"][c.ANNOTATION_RUNNER_SCALE_SET_ID]
                creates = gh.calls(SCALE_SET_CREATE, method="POST")
                assert creates == 1

                # -- the upgrade: current CRDs over the live objects, a new image ------------
                await install_crd(kube, current_crd())
                async with controller(kubeconfig, namespace, gh, kube, "gharc:0.2") as new:
                    ars = await new.ars()  # reads as before

                    async def new_image() -> JSON | None:
                        p = await new.wait_listener_pod(ars)
                        image = p["spec"]["containers"][0]["image"]
                        return p if image == "gharc:0.2" else None

                    # The image alone moves the listener (no spec change yet).
                    await eventually(new_image, timeout=30, message="listener on gharc:0.2")
                    await kube.patch(
                        AUTOSCALING_RUNNER_SETS,
                        ars,
                        {"spec": {"maxRunners": 4, "burst": {"runners": 2}}},
                    )
                    updated = await new.ars()
                    assert updated["spec"]["burst"] == {"runners": 2}  # the new field is kept
                    ars, ers_after, _ = await _settled(new)
                    annotations = ars["metadata"]["annotations"]
                    assert annotations[c.ANNOTATION_RUNNER_SCALE_SET_ID] == scale_set_id
                    assert ers_after["metadata"]["uid"] == ers["metadata"]["uid"]
                    assert gh.calls(SCALE_SET_CREATE, method="POST") == creates
                    assert len(gh.state.scale_sets) == 1

                    # Deleting still works end to end (finalizers, GitHub clean-up).
                    await kube.delete(AUTOSCALING_RUNNER_SETS, ars)

                    async def gone() -> bool:
                        try:
                            await kube.get(AUTOSCALING_RUNNER_SETS, "arc", namespace=namespace)
                        except kerrors.NotFound:
                            return True
                        return False

                    await eventually(gone, timeout=30, message="scale set deleted")
                    with pytest.raises(kerrors.NotFound):
                        await kube.get(
                            EPHEMERAL_RUNNER_SETS, ers["metadata"]["name"], namespace=namespace
                        )
                    assert not gh.state.scale_sets
            finally:
                await install_crd(kube, current_crd())
    finally:
        await kube.close()
