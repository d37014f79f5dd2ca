"""A runner process that hangs after its job completed (ARC #4603: a slot held 7 hours).

The fake completes the job and de-registers the ephemeral runner, as GitHub does; the pod
stays Running because its process never exits. The registration reconcile finishes the
runner after the hang timeout: Succeeded, pod deleted, a Warning event, counted; and the
set makes no runner for the job that is already done (behaviours B3).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, sweeper_fixture, world_fixture

from gharc.api.scaleset import constants as c
from gharc.controllers.scaleset import hangs, orphans
from gharc.kube import errors as kerrors
from gharc.kube.resources import PODS
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


sweeper = sweeper_fixture(interval=0.5, grace=1.5, hang_timeout=1.0)


def _hung_count(namespace: str) -> float:
    return hangs.HUNG_RUNNERS.labels(namespace=namespace)._value.get()


async def test_runner_hung_after_its_job_is_finished(
    world: World, sweeper: orphans.OrphanReconciler
) -> None:
    await world.create_ers(replicas=2, patch_id=1)
    hung, busy = await world.wait_runners(2)
    for er in (hung, busy):
        await world.run_pod(er["metadata"]["name"])
    name = hung["metadata"]["name"]
    job = await world.take_job(await world.runner(name))
    await world.take_job(await world.runner(busy["metadata"]["name"]))  # still running
    before = _hung_count(world.namespace)
    world.complete_job(job)  # GitHub de-registers it; the pod is never seen exiting

    async def pod_gone() -> bool:
        try:
            pod = await world.kube.get(PODS, c.runner_pod_name(name), namespace=world.namespace)
        except kerrors.NotFound:
            return True
        return bool(pod["metadata"].get("deletionTimestamp"))

    await eventually(pod_gone, timeout=30, message="the hung runner's pod deleted")
    # The reaper deletes the pod, then counts and records: wait for the event it sends last.
    await world.recorder.seen("RunnerHung", name)
    assert _hung_count(world.namespace) == before + 1

    async def cleaned_up() -> bool:
        names = {r["metadata"]["name"] for r in await world.runners(include_deleting=True)}
        return name not in names

    await eventually(cleaned_up, timeout=30, message="the finished runner deleted by its set")
    # The busy runner is untouched, and no runner was made for the job that is done.
    [left] = await world.runners(include_deleting=True)
    assert left["metadata"]["name"] == busy["metadata"]["name"]
    assert "RunnerHung" not in world.recorder.reasons(busy["metadata"]["name"])
