"""EphemeralRunner: a controller that dies while cleaning up a finished runner leaves
nothing behind (chaos leader-kill left a JIT Secret this way).

The runner's job is done and its pod exited 0; the reconciler writes the Succeeded phase,
then deletes the pod and the JIT Secret. If the process dies between those deletes, its
successor must still find the runner's Secret to delete. It can only do so while the
EphemeralRunner exists: the set deletes a finished runner at once, so the runner's
finalizer must hold it until its objects are gone (a cluster without a garbage collector
pass, or one that lags, otherwise keeps the Secret with its registration config)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _erworld import World, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNERS
from gharc.api.scaleset import constants as c
from gharc.kube import errors as kerrors
from gharc.kube.resources import SECRETS
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


async def test_a_finished_runner_keeps_its_finalizer_until_its_secret_is_deleted(
    world: World,
) -> None:
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    secret_name = c.runner_jit_secret_name(name)
    await world.run_pod(name)
    job = await world.take_job(er)

    # The process freezes at the Secret's DELETE, then dies there.
    frozen = asyncio.Event()
    real_delete = world.kube.delete

    async def delete(resource: Any, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if resource is SECRETS and (obj if isinstance(obj, str) else "") == secret_name:
            frozen.set()
            await asyncio.Event().wait()
        return await real_delete(resource, obj, *args, **kwargs)

    world.kube.delete = delete  # type: ignore[method-assign]
    world.complete_job(job)
    await world.exit_pod(name, 0)
    await asyncio.wait_for(frozen.wait(), 30)
    await world.stop(crash=True)
    world.kube.delete = real_delete  # type: ignore[method-assign]

    done = await world.runner(name)
    assert done["status"]["phase"] == c.PHASE_SUCCEEDED
    assert await world.kube.get(SECRETS, secret_name, namespace=world.namespace)
    # The successor's set deletes the finished runner before its runner reconcile ran.
    await world.kube.delete(EPHEMERAL_RUNNERS, name, namespace=world.namespace)
    try:
        await world.runner(name)
    except kerrors.NotFound:
        pytest.fail("the finished runner vanished with its JIT Secret still there")

    await world.start()

    async def cleaned() -> bool:
        secrets = {s["metadata"]["name"] for s in await world.secrets()}
        runners = await world.runners(include_deleting=True)
        return secret_name not in secrets and name not in {r["metadata"]["name"] for r in runners}

    await eventually(cleaned, timeout=30, message="the runner and its Secret gone")
    # The runner de-registered itself after its job: no RemoveRunner for it.
    assert world.remove_calls() == 0
