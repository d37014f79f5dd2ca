"""The listener answers the set's finished-runner cleanup marker with a fresh count (B3).

Without the answer the EphemeralRunnerSet waits for the next message to lift its scale-up
suppression; after a burst of completions that is a whole long poll away, with jobs queued.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from listener_world import ERS_NAME, World, in_process

from gharc.api.scaleset.constants import GROUP, PLURAL_EPHEMERAL_RUNNER_SETS, VERSION
from gharc.github.models import RunnerScaleSetStatistic
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

LONG_POLL = 30.0


async def _mark_cleanup(world: World, patch_id: int) -> None:
    await client.CustomObjectsApi(world.api).patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        world.namespace,
        PLURAL_EPHEMERAL_RUNNER_SETS,
        ERS_NAME,
        {"status": {"finishedRunnerCleanupPatchID": patch_id}},
        _content_type="application/merge-patch+json",
    )


async def _spec(world: World) -> tuple[int, int]:
    return await world.spec()


async def test_cleanup_marker_for_the_latest_patch_gets_a_fresh_patch_at_once(
    world: World,
) -> None:
    world.gh.state.poll_timeout = LONG_POLL
    async with in_process(world, min_runners=0, max_runners=10) as listener:
        world.enqueue(3)
        replicas, patch_id = await eventually(
            lambda: _nonzero_spec(world), timeout=10, message="scale up"
        )
        assert replicas == 3 and patch_id > 0
        before = world.gh.calls("*/runnerscalesets/{scale_set_id}", method="GET")
        polls = world.gh.calls("*/messages", method="GET")
        await _mark_cleanup(world, patch_id)
        new_replicas, new_id = await eventually(
            lambda: _spec_after(world, patch_id), timeout=10, message="fresh patch"
        )
        # the answer came from the marker, not from a poll's end: none has ended since
        assert world.gh.calls("*/messages", method="GET") == polls, world.gh.call_table()
        assert new_id > patch_id and new_replicas == 3
        # the count was re-read from the service, not reused from the stale patch
        assert world.gh.calls("*/runnerscalesets/{scale_set_id}", method="GET") == before + 1
        # counted once its patch is written, so the count may follow the patch we saw
        await eventually(lambda: listener.cleanups_answered == 1, message="answer counted")


async def test_a_marker_for_a_patch_of_zero_replicas_is_not_answered(world: World) -> None:
    """The set's suppression only holds back creates: a cleanup after the count went to 0
    (how a quiet set's job ends) needs no fresh count, so no statistics read, no patch."""
    world.gh.state.poll_timeout = LONG_POLL
    async with in_process(world, min_runners=0, max_runners=10) as listener:
        world.enqueue(1)
        await eventually(lambda: _nonzero_spec(world), timeout=10, message="scale up")
        rid = world.start_runner("runner-0")
        assert rid is not None
        world.finish(rid)
        replicas, patch_id = await eventually(
            lambda: _zero_after_completion(world), timeout=10, message="scale down"
        )
        assert replicas == 0 and patch_id > 0
        reads = world.gh.calls("*/runnerscalesets/{scale_set_id}", method="GET")
        await _mark_cleanup(world, patch_id)
        await eventually(lambda: listener._marker_seen == patch_id, message="seen")
        assert listener.cleanups_answered == 0
        assert await world.spec() == (0, patch_id)
        assert world.gh.calls("*/runnerscalesets/{scale_set_id}", method="GET") == reads


async def test_a_marker_for_an_older_patch_is_not_answered(world: World) -> None:
    world.gh.state.poll_timeout = LONG_POLL
    async with in_process(world, min_runners=0, max_runners=10) as listener:
        world.enqueue(2)
        _, patch_id = await eventually(lambda: _nonzero_spec(world), timeout=10)
        await _mark_cleanup(world, patch_id + 7)
        # give the watch time to deliver the status change, then check nothing was sent
        await eventually(lambda: _status_marker(world, patch_id + 7), timeout=5)
        assert listener.cleanups_answered == 0
        assert (await world.ers())["spec"]["patchID"] == patch_id


async def test_a_count_read_before_a_cleanup_is_refused_and_read_again(world: World) -> None:
    """The count was read, then the set cleaned up a finished runner, then the count was
    sent: it may still hold the finished job, and with the patch ID moved on the set would
    make a runner for it. The patch is conditioned on the marker known before the read, so
    the API server refuses it, and the count is read again from the service."""
    world.gh.state.poll_timeout = LONG_POLL
    async with in_process(world, min_runners=0, max_runners=10) as listener:
        world.enqueue(3)
        _, patch_id = await eventually(lambda: _nonzero_spec(world), timeout=10)
        await _mark_cleanup(world, patch_id)
        await eventually(lambda: listener.cleanups_answered == 1, message="marker seen")
        # Counts read while the marker was ``patch_id``, holding a job since finished ...
        stale = RunnerScaleSetStatistic(total_assigned_jobs=5)
        listener.handler.record_statistics(stale, patch_id)
        # ... then the set cleans up (a new marker), then the count goes out.
        await _mark_cleanup(world, patch_id + 100)
        reads = world.gh.calls("*/runnerscalesets/{scale_set_id}", method="GET")
        listener.scaler.mark_dirty()
        assert await listener.publish()
        replicas, _ = await world.spec()
        assert replicas == 3, "the stale count of 5 reached the set"
        assert listener.stale_patches == 1
        assert world.gh.calls("*/runnerscalesets/{scale_set_id}", method="GET") == reads + 1


async def _nonzero_spec(world: World) -> tuple[int, int] | None:
    replicas, patch_id = await world.spec()
    return (replicas, patch_id) if patch_id > 0 else None


async def _spec_after(world: World, patch_id: int) -> tuple[int, int] | None:
    replicas, new_id = await world.spec()
    return (replicas, new_id) if new_id != patch_id else None


async def _zero_after_completion(world: World) -> tuple[int, int] | None:
    replicas, patch_id = await world.spec()
    return (replicas, patch_id) if replicas == 0 and patch_id > 0 else None


async def _status_marker(world: World, marker: int) -> Any:
    status = (await world.ers()).get("status") or {}
    return status.get("finishedRunnerCleanupPatchID") == marker
