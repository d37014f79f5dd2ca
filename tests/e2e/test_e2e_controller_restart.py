"""A controller restart in the middle of a burst loses nothing and duplicates nothing."""

from __future__ import annotations

import asyncio

import pytest
from _e2e import all_completed, enqueue_jobs, job_state, report, wait_until

from testworld.world import World

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_controller_restart_mid_burst(world: World) -> None:
    ns = world.controller_namespace
    await world.apply_scale_set(ns, "restart", max_runners=6)
    await world.wait_for_listener("restart")
    jobs = enqueue_jobs(world, ["restart"], 24, durations=(0.5, 1.5))
    await wait_until(
        lambda: sum(j.status == "completed" for j in jobs) >= 6,
        60,
        "the burst to be under way",
        world=world,
    )
    code = await world.stop_controller()
    assert code == 0, f"the controller did not stop cleanly on SIGTERM: exit {code}"
    await asyncio.sleep(2)
    await world.start_controller()
    await wait_until(lambda: all_completed(jobs), 180, "every job of the burst", world=world)

    async def drained() -> bool:
        return not await world.ephemeral_runners(ns)

    await wait_until(drained, 30, "the set to drain", world=world)
    rep = report(world, jobs)
    assert job_state(jobs) == "completed=24"
    assert world.runners_created() == 24, rep.text()
