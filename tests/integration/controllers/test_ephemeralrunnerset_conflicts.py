"""The B3 cleanup marker is written against the patch ID it depends on, not against every
unrelated write of the set (the listener's spec patches, our own count writes): those
made the resourceVersion-locked write fail with 409 and redo the reconcile."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNER_SETS
from gharc.controllers.scaleset.credentials import ClientResolver
from gharc.controllers.scaleset.ephemeralrunnerset import Buckets, EphemeralRunnerSetReconciler
from gharc.kube import errors as kerrors
from gharc.kube.expectations import Expectations

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


def _reconciler(world: World) -> EphemeralRunnerSetReconciler:
    return EphemeralRunnerSetReconciler(
        world.kube,
        None,  # type: ignore[arg-type]
        world.options,
        ClientResolver(world.kube, world.pool),
    )


async def test_marker_write_survives_unrelated_writes(world: World) -> None:
    await world.stop()
    ers = await world.create_ers(replicas=1, patch_id=7)
    stale = await world.kube.patch_status(
        EPHEMERAL_RUNNER_SETS, ers, {"status": {"phase": "Running"}}
    )
    # Written after our read: a count write and a listener patch of another field.
    await world.kube.patch_status(
        EPHEMERAL_RUNNER_SETS, stale, {"status": {"pendingEphemeralRunners": 1}}
    )
    await world.kube.merge_patch(EPHEMERAL_RUNNER_SETS, stale, {"metadata": {"labels": {"x": "y"}}})

    buckets = Buckets.of([], Expectations())
    await _reconciler(world)._clean_finished(stale, buckets)

    live = await world.kube.get(EPHEMERAL_RUNNER_SETS, "set", namespace=world.namespace)
    assert live["status"]["finishedRunnerCleanupPatchID"] == 7


async def test_marker_is_not_written_for_a_patch_id_that_changed(world: World) -> None:
    await world.stop()
    stale = await world.create_ers(replicas=1, patch_id=7)
    await world.kube.merge_patch(EPHEMERAL_RUNNER_SETS, stale, {"spec": {"patchID": 8}})

    with pytest.raises(kerrors.Conflict):
        await _reconciler(world)._clean_finished(stale, Buckets.of([], Expectations()))
    live = await world.kube.get(EPHEMERAL_RUNNER_SETS, "set", namespace=world.namespace)
    assert (live.get("status") or {}).get("finishedRunnerCleanupPatchID") is None
