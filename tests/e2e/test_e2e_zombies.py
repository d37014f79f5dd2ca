"""Issue 19 §6 end to end: runners whose registration GitHub deleted are replaced.

ARC #4396/#4399: GitHub dropped the registrations of idle runners whose pods ran on, so
27 runners sat idle for hours while jobs queued. Here the fake deletes every idle runner's
registration and keeps their processes polling (they can never get a job); jobs are then
queued. The controller's registration reconcile (a 2 s interval and 5 s grace here; 60 s
and 120 s in production) must replace every zombie within two minutes, and the jobs must
run on fresh runners without the set over-creating runners for them.
"""

from __future__ import annotations

import time

import pytest
import pytest_asyncio
from _e2e import WorldFactory, all_completed, enqueue_jobs, job_state, unique_namespace, wait_until
from conftest import SHORT_POLL

from testworld.world import World

pytestmark = pytest.mark.asyncio(loop_scope="session")

ARGS = ["--runner-registration-sync-interval", "2", "--runner-registration-grace", "5"]
MIN_RUNNERS = 4
JOBS = 20


@pytest_asyncio.fixture(loop_scope="session")
async def world(worlds: WorldFactory, request: pytest.FixtureRequest) -> World:
    return await worlds.create(
        unique_namespace(request), poll_timeout=SHORT_POLL, controller_args=ARGS
    )


async def test_every_zombie_is_replaced_within_two_minutes(world: World) -> None:
    ns = world.controller_namespace
    name = "zombies"
    await world.apply_scale_set(ns, name, min_runners=MIN_RUNNERS, max_runners=10)
    await world.wait_for_listener(name)
    st = world.github.state

    def online() -> list[int]:
        return [r.id for r in st.runners.values() if r.online and r.job is None]

    await wait_until(lambda: len(online()) == MIN_RUNNERS, 120, "idle runners", world=world)
    zombies = {r.name for r in st.runners.values() if r.id in online()}
    for rid in online():
        st.delete_registration_keep_process(rid)
    jit_before = world.github.calls("*/generatejitconfig", method="POST", status=200)
    t0 = time.monotonic()

    async def replaced() -> bool:
        names = {er["metadata"]["name"] for er in await world.ephemeral_runners(ns)}
        return not names & zombies

    await wait_until(replaced, 120, "every zombie replaced", world=world)
    took = time.monotonic() - t0
    jobs = enqueue_jobs(world, [name], JOBS, durations=(0.2, 1.0))
    await wait_until(lambda: all_completed(jobs), 180, "the jobs", world=world)
    assert all(j.runner_name not in zombies for j in jobs), job_state(jobs)
    made = world.github.calls("*/generatejitconfig", method="POST", status=200) - jit_before
    # Every registration since the zombies went either took a job or is in the idle
    # min-runner pool at the end (ephemeral runners: one per job at best).
    per_job = (made - MIN_RUNNERS) / JOBS
    print(f"zombies {len(zombies)} replaced in {took:.1f}s; runners per job {per_job:.2f}")
    assert took < 120
    assert per_job <= 1.05
