"""B3 end to end: no runner is created for a job that has already finished.

A mix of bursts and a trickle (jobs finishing while the listener's patches are in
flight) is where a stale ``replicas`` creates a replacement for a completed job. Every
runner created must have run a job: runners created == jobs, wasted == 0."""

from __future__ import annotations

import asyncio
import time

import pytest
from _e2e import all_completed, job_state, report, wait_until

from testworld.sim.workload import Workload
from testworld.world import World

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_runners_created_equals_jobs(world: World) -> None:
    ns = world.controller_namespace
    await world.apply_scale_set(ns, "b3", max_runners=6)
    await world.wait_for_listener("b3")
    arrivals = Workload.parse(
        "burst=0:6,burst=12:6,trickle=40/20,jobs=0.3-2,failures=0.1"
    ).arrivals()
    t0 = time.monotonic()
    jobs = []
    for a in arrivals:
        delay = a.at - (time.monotonic() - t0)
        if delay > 0:
            await asyncio.sleep(delay)
        jobs.append(
            world.github.enqueue_job(
                "octo-org/octo-repo", ["b3"], duration=a.duration, result=a.result
            )
        )
    await wait_until(lambda: all_completed(jobs), 120, "all jobs", world=world)

    async def drained() -> bool:
        return not await world.ephemeral_runners(ns)

    await wait_until(drained, 30, "every EphemeralRunner to go", world=world)
    await asyncio.sleep(2)  # a late, wasted runner would be created about now
    rep = report(world, jobs)
    assert job_state(jobs) == f"completed={len(jobs)}"
    assert rep.runners_created == len(jobs), rep.text()
    assert rep.wasted_runners == 0, rep.text()
    assert not await world.ephemeral_runners(ns), "a runner appeared after the jobs were done"
