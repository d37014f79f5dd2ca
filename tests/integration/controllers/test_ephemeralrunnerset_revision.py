"""Behaviour B4: an actionable revision rebuilds idle and pending runners exactly once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from _erworld import World, runner_template, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset.views import ANNOTATION_ACTIONABLE_REVISION
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


async def _bump(world: World, revision: int, template: dict) -> None:
    await world.kube.merge_patch(
        EPHEMERAL_RUNNER_SETS,
        "set",
        {
            "spec": {
                "actionableRevision": revision,
                "ephemeralRunnerSpec": world.runner_spec(template),
            }
        },
        namespace=world.namespace,
    )


def _image(er: dict) -> str:
    return str(er["spec"]["spec"]["containers"][0]["image"])


async def test_b4_revision_rebuilds_idle_and_pending_keeps_busy(world: World) -> None:
    await world.create_ers(template=runner_template(image="runner:1"), revision=1)
    await world.scale(3, 1)
    runners = await world.wait_runners(3)
    busy, idle, pending = runners
    await world.run_pod(busy["metadata"]["name"])
    await world.run_pod(idle["metadata"]["name"])  # `pending` keeps a Pending pod
    await world.take_job(busy)
    old_ids = {r["status"]["runnerId"] for r in (idle, pending)}
    # A cleanup marker for the current patch would suppress the re-creation; the revision
    # clears it.
    await world.kube.patch_status(
        EPHEMERAL_RUNNER_SETS,
        "set",
        {"status": {"finishedRunnerCleanupPatchID": 1}},
        namespace=world.namespace,
    )

    await _bump(world, 2, runner_template(image="runner:2"))

    async def rebuilt() -> list[dict] | None:
        live = await world.runners(include_deleting=True)
        names = {r["metadata"]["name"] for r in live}
        fresh = [r for r in live if r["metadata"]["name"] != busy["metadata"]["name"]]
        ok = (
            busy["metadata"]["name"] in names
            and len(fresh) == 2
            and all(_image(r) == "runner:2" for r in fresh)
            and all((r.get("status") or {}).get("runnerId") for r in fresh)
            and not any(r["metadata"].get("deletionTimestamp") for r in live)
        )
        return live if ok else None

    live = await eventually(rebuilt, timeout=30, message="idle and pending runners rebuilt")
    kept = next(r for r in live if r["metadata"]["name"] == busy["metadata"]["name"])
    assert kept["metadata"]["uid"] == busy["metadata"]["uid"]
    assert _image(kept) == "runner:1"
    for r in live:
        if r is not kept:
            assert r["metadata"]["annotations"][ANNOTATION_ACTIONABLE_REVISION] == "2"
    assert not old_ids & world.registered()
    assert busy["status"]["runnerId"] in world.registered()
    status = (await world.ers())["status"]
    assert status["appliedActionableRevision"] == 2
    assert status.get("finishedRunnerCleanupPatchID") is None
    await world.recorder.seen("RevisionApplied", "set")


async def test_b4_empty_env_list_is_not_drift(world: World) -> None:
    """``env: []`` reads back as absent from the pod API: the same template, no rebuild."""
    await world.create_ers(template=runner_template(), revision=1)
    await world.scale(2, 1)
    before = {r["metadata"]["uid"] for r in await world.wait_runners(2)}

    await _bump(world, 2, runner_template(env=[]))

    async def applied() -> bool:
        return ((await world.ers()).get("status") or {}).get("appliedActionableRevision") == 2

    await eventually(applied, timeout=20, message="revision 2 applied")
    await asyncio.sleep(1)
    after = {r["metadata"]["uid"] for r in await world.runners(include_deleting=True)}
    assert after == before
    assert "0 idle runner(s) replaced" in " ".join(m for _, _, _, m in world.recorder.events)
