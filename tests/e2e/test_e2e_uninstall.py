"""Uninstall while jobs run: deleting the AutoscalingRunnerSet finishes cleanly in the
cluster (no ARS, ERS, ER, listener or pod left) and at GitHub (no scale set, session or
runner left)."""

from __future__ import annotations

import pytest
from _e2e import enqueue_jobs, listener_pods, wait_until

from testworld.world import World

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_delete_scale_set_while_jobs_run(world: World) -> None:
    ns = world.controller_namespace
    gh = world.github
    await world.apply_scale_set(ns, "bye", max_runners=4)
    await world.wait_for_listener("bye")
    jobs = enqueue_jobs(world, ["bye"], 8, durations=(60, 60))
    await wait_until(
        lambda: sum(j.status == "running" for j in jobs) >= 3, 60, "jobs running", world=world
    )
    await world.delete_scale_set(ns, "bye")

    async def gone() -> dict[str, int]:
        return {
            "autoscalingrunnersets": len(await world.custom_objects(ns, "autoscalingrunnersets")),
            "ephemeralrunnersets": len(await world.custom_objects(ns, "ephemeralrunnersets")),
            "ephemeralrunners": len(await world.custom_objects(ns, "ephemeralrunners")),
            "autoscalinglisteners": len(await world.custom_objects(ns, "autoscalinglisteners")),
            "pods": len(await world.pods(ns)),
            "listener pods": len(await listener_pods(world, ns)),
        }

    async def all_gone() -> bool:
        return not any((await gone()).values())

    try:
        await wait_until(all_gone, 90, "the scale set's objects to go", world=world)
    except AssertionError as err:
        raise AssertionError(f"{err}: left {await gone()}") from None
    state = gh.state
    await wait_until(
        lambda: not state.scale_sets and not state.sessions and not state.runners,
        30,
        "GitHub to have no scale set, session or runner",
        world=world,
    )
