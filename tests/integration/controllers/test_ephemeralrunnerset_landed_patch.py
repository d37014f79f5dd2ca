"""The first scale up of a set whose count this process's own listener wrote reads no
EphemeralRunnerSet from the API server (B3's marker is in the cache by then), and still
holds back a runner for a job that already finished."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.controllers.scaleset.ephemeralrunnerset import EphemeralRunnerSetReconciler
from testworld.wait import consistently

pytestmark = pytest.mark.cluster

ERS_LABEL, ER_LABEL = str(EPHEMERAL_RUNNER_SETS), str(EPHEMERAL_RUNNERS)


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


def _calls(world: World, verb: str, label: str) -> int:
    return sum(
        n
        for (v, res, code), n in world.kube.request_counts.items()
        if v == verb and res == label and code.startswith("2")
    )


def _listener_wrote(world: World, landed: tuple[int, int]) -> None:
    """As if this process's in-process listener for the set had written ``landed``."""
    [reconciler] = [
        c.reconciler
        for c in world.controllers
        if isinstance(c.reconciler, EphemeralRunnerSetReconciler)
    ]
    reconciler.landed_patch = lambda namespace, name: landed if name == "set" else None


async def test_first_scale_up_after_an_own_patch_reads_no_runner_set(world: World) -> None:
    await world.create_ers()
    _listener_wrote(world, (2, 1))
    gets = _calls(world, "get", ERS_LABEL)
    await world.scale(2, 1)
    await world.wait_runners(2)
    assert _calls(world, "get", ERS_LABEL) == gets


async def test_a_patch_this_process_did_not_write_is_checked_against_the_server(
    world: World,
) -> None:
    await world.create_ers()
    _listener_wrote(world, (1, 1))  # an older count than the one on the set
    gets = _calls(world, "get", ERS_LABEL)
    await world.scale(2, 2)
    await world.wait_runners(2)
    assert _calls(world, "get", ERS_LABEL) == gets + 1


async def test_a_marker_written_before_the_own_patch_still_holds_the_scale_up(
    world: World,
) -> None:
    """A previous holder cleaned up finished runners for patch 1 and wrote the marker; this
    process's listener then wrote (2, 1) again (statistics that still count the finished
    job). The cache that shows the count shows the marker: no runner."""
    ers = await world.create_ers()
    await world.kube.patch_status(
        EPHEMERAL_RUNNER_SETS, ers, {"status": {"finishedRunnerCleanupPatchID": 1}}
    )
    _listener_wrote(world, (2, 1))
    await world.scale(2, 1)

    async def no_runners() -> bool:
        return not await world.runners(include_deleting=True)

    await consistently(no_runners, seconds=2, message="no runner for the finished job's patch")
    assert _calls(world, "create", ER_LABEL) == 0
    await world.scale(2, 2)  # a new patch: a new job
    await world.wait_runners(2)
