"""A burst larger than maxRunners keeps flowing with GitHub's real 50 s long poll.

Found by the 100-job test: after each wave of maxRunners jobs, the EphemeralRunnerSet
cleans up the finished runners under the listener's latest patch ID, records that ID as
its cleanup marker (B3) and suppresses scale-up while spec.patchID equals it. But that
patch was published *after* the JobCompleted messages (it already accounts for them), and
nothing else happens until the listener's next long poll returns empty: every wave waits
out the poll timeout (50 s against GitHub) with jobs queued and no runner at all.

Fixed in the listener: it watches its EphemeralRunnerSet and answers a cleanup marker for
its latest patch with a fresh count (statistics re-read from the service) and a new ID.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from _e2e import WorldFactory, all_completed, enqueue_jobs, job_state, unique_namespace

pytestmark = pytest.mark.asyncio(loop_scope="session")

GITHUB_POLL = 50.0
MAX_IDLE_GAP = 15.0


async def test_burst_beyond_max_runners_never_stalls(
    worlds: WorldFactory, request: pytest.FixtureRequest
) -> None:
    ns = unique_namespace(request)
    world = await worlds.create(ns, poll_timeout=GITHUB_POLL)
    await world.apply_scale_set(ns, "stall", max_runners=3)
    await world.wait_for_listener("stall")
    jobs = enqueue_jobs(world, ["stall"], 9, durations=(0.2, 0.5))
    # Watch for the stall: jobs still queued while the set has no runner at all.
    t0 = time.monotonic()
    gap_start: float | None = None
    worst = 0.0
    while not all_completed(jobs) and time.monotonic() - t0 < 90:
        world.check_controller()
        queued = any(j.status != "completed" and j.runner_id is None for j in jobs)
        live = sum((await world.runner_phases(ns)).values())
        if queued and live == 0:
            gap_start = gap_start or time.monotonic()
            worst = max(worst, time.monotonic() - gap_start)
            if worst > MAX_IDLE_GAP:
                break
        else:
            gap_start = None
        await asyncio.sleep(0.25)
    assert worst <= MAX_IDLE_GAP, (
        f"jobs waited {worst:.0f} s with no runner at all ({job_state(jobs)})"
    )
    assert all_completed(jobs), job_state(jobs)
