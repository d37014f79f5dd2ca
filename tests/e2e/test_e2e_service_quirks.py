"""What the real Actions service does that a listener must survive, each on its own.

The fake's switches (docs/sim-github.md, "Service quirks") model answers GitHub's service
gives real users: a job reassigned (JobAssigned then JobCompleted ``canceled``, up to three
times, each after ``reassign_after``), statistics lagging the messages in their batch
(ARC #3420), github.com assigning jobs without JobAvailable or an acquire call, and
``runnerRequestId`` 0 outside JobAvailable. With each, gharc's controller and listener
must still give every job a runner, and no message may be dropped as unreadable.
"""

from __future__ import annotations

import pytest
from _e2e import WorldFactory, all_completed, enqueue_jobs, job_state, unique_namespace, wait_until

pytestmark = pytest.mark.asyncio(loop_scope="session")

QUIRKS = {
    # Each attempt held 2 s, not the service's 5 minutes, so the case fits its time.
    "reassigned-3-times": {"reassign_times": 3, "reassign_after": 2.0, "reassign_gap": 0.5},
    "lagging-statistics": {"lagging_statistics": True},
    "no-acquire": {"skip_acquire": True},
    "zero-request-ids": {"zero_request_ids": True},
}
JOBS = 8


@pytest.mark.parametrize("quirk", list(QUIRKS.values()), ids=list(QUIRKS))
async def test_every_job_gets_a_runner(
    worlds: WorldFactory, request: pytest.FixtureRequest, quirk: dict[str, object]
) -> None:
    ns = unique_namespace(request)
    world = await worlds.create(ns, poll_timeout=3.0)
    for attr, value in quirk.items():
        setattr(world.github.state, attr, value)
    await world.apply_scale_set(ns, "quirks", max_runners=4)
    await world.wait_for_listener("quirks")
    jobs = enqueue_jobs(world, ["quirks"], JOBS, durations=(0.2, 0.5))
    await wait_until(lambda: all_completed(jobs), 120, "every job to complete", world=world)
    assert all(j.conclusion == "succeeded" and j.runner_id for j in jobs), job_state(jobs)
    assert world.runners_created() >= JOBS
    assert world.github.state.unhandled_errors == 0
