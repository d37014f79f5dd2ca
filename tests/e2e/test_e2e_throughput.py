"""100 jobs through one scale set: every job runs, on exactly one runner each, and the set
goes back to minRunners leaving no runner pod or Secret behind (behaviours B3, G14)."""

from __future__ import annotations

import pytest
from _e2e import (
    all_completed,
    enqueue_jobs,
    job_state,
    report,
    runner_leftovers,
    wait_until,
)

from testworld.world import SECRET_NAME, World

pytestmark = pytest.mark.asyncio(loop_scope="session")


@pytest.mark.relies_on("truncate-50", "capacity")
async def test_hundred_jobs_max_ten_runners(world: World) -> None:
    ns = world.controller_namespace
    await world.apply_scale_set(ns, "hundred", max_runners=10)
    await world.wait_for_listener("hundred")
    jobs = enqueue_jobs(world, ["hundred"], 100, durations=(0.2, 1.0))
    peak = 0

    async def done() -> bool:
        nonlocal peak
        phases = await world.runner_phases(ns)
        peak = max(peak, sum(v for k, v in phases.items() if k != "deleting"))
        return all_completed(jobs)

    await wait_until(done, 150, lambda_msg := "100 jobs to complete", world=world)
    del lambda_msg
    rep = report(world, jobs)
    assert rep.completed == 100
    assert rep.never_picked_up == []
    assert world.runners_created() == 100, rep.text()
    assert rep.wasted_runners == 0
    assert peak <= 10, f"maxRunners 10 exceeded: {peak} live EphemeralRunners"

    async def back_to_min() -> bool:
        left = await runner_leftovers(world, ns)
        return not any(left.values())

    try:
        await wait_until(back_to_min, 30, "the set to return to minRunners 0", world=world)
    except AssertionError as err:
        raise AssertionError(f"{err}: left {await runner_leftovers(world, ns)}") from None
    secrets = {s["metadata"]["name"] for s in await world.secrets(ns)}
    assert SECRET_NAME in secrets
    assert world.runners_created() == 100, "a runner was created after the jobs were done"
    assert job_state(jobs) == "completed=100"
