"""Reading a chaos case's outcome from the outside: the fake GitHub and the API server.

Nothing here asks the controller what it thinks it did. A job "never got a runner" when the
fake GitHub never gave it to one; runners are counted as the JIT configs GitHub handed out;
an orphan is a registration GitHub still holds for one of the case's scale sets once the
EphemeralRunners are gone.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterable
from typing import Any

from testworld.chaos.report import CaseResult
from testworld.sim.github.state import Job
from testworld.world import World
from testworld.worlds import all_completed, runner_leftovers, scale_set_id

#: How long a case waits for its jobs after the fault, and for the drain after that.
JOBS_TIMEOUT = 180.0
DRAIN_TIMEOUT = 60.0


async def wait_for_jobs(world: World, jobs: list[Job], timeout: float = JOBS_TIMEOUT) -> bool:
    """Until every job completed (True) or ``timeout`` passed (False); the controller dying
    fails at once. Never raises on the timeout: the table must show what was missed."""
    deadline = time.monotonic() + timeout
    while not all_completed(jobs):
        world.check_controller()
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.25)
    return True


async def wait_for_drain(world: World, namespace: str, timeout: float = DRAIN_TIMEOUT) -> None:
    """Until no runner object (EphemeralRunner, its pod or Secret) is left in ``namespace``,
    or ``timeout``: a pod outlives its EphemeralRunner for a moment while it terminates."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        world.check_controller()
        left = await runner_leftovers(world, namespace)
        if not any(left.values()):
            return
        await asyncio.sleep(0.5)


def first_runner_after(jobs: Iterable[Job], t0: float) -> float | None:
    """Seconds from ``t0`` (the fake's clock, epoch seconds) to the first of ``jobs`` given
    a runner; None when none was."""
    times = [j.runner_assign_time for j in jobs if j.runner_assign_time is not None]
    return round(min(times) - t0, 2) if times else None


def first_runner_of_reacquired(jobs: Iterable[Job], t0: float) -> float | None:
    """Seconds from ``t0`` to the first runner given to a job acquired after ``t0``: the
    recovered listener's first job on a runner. Jobs enqueued after a fault can sit behind
    a backlog that the old listener had already acquired; this one cannot."""
    return first_runner_after(
        (j for j in jobs if j.scale_set_assign_time is not None and j.scale_set_assign_time > t0),
        t0,
    )


def first_acquired_after(jobs: Iterable[Job], t0: float) -> float | None:
    """Seconds from ``t0`` to the first of ``jobs`` acquired after it (a listener is back)."""
    times = [
        j.scale_set_assign_time
        for j in jobs
        if j.scale_set_assign_time is not None and j.scale_set_assign_time > t0
    ]
    return round(min(times) - t0, 2) if times else None


def runners_without_job(world: World) -> int:
    """Registrations GitHub handed out (JIT configs) that never ran a job (a replaced
    registration is one of them)."""
    ran = {j.runner_id for j in world.github.state.jobs.values() if j.runner_id is not None}
    return max(0, world.runners_created() - len(ran))


def pickup_p50(jobs: Iterable[Job]) -> float | None:
    """Median seconds from enqueue to the job starting on a runner."""
    waits = [j.start_time - j.queue_time for j in jobs if j.start_time is not None]
    return round(statistics.median(waits), 2) if waits else None


def orphan_registrations(world: World, scale_sets: list[str]) -> int:
    """Registrations GitHub holds for ``scale_sets`` (call after the drain: an ephemeral
    runner de-registers after its job, and the controller removes any it deletes)."""
    ids = {scale_set_id(world, name) for name in scale_sets}
    return sum(1 for r in world.github.state.runners.values() if r.scale_set_id in ids)


async def outcome(
    world: World,
    case: str,
    jobs: list[Job],
    *,
    namespace: str,
    scale_sets: list[str],
    jobs_timeout: float = JOBS_TIMEOUT,
) -> CaseResult:
    """Wait for ``jobs`` and the drain, then count; the caller adds the recovery time."""
    await wait_for_jobs(world, jobs, jobs_timeout)
    await wait_for_drain(world, namespace)
    left = await runner_leftovers(world, namespace)
    extra: dict[str, Any] = {"runners_without_job": runners_without_job(world)}
    if any(left.values()):
        extra["leftover"] = {kind: names for kind, names in left.items() if names}
    registered = world.registrations_by_runner()
    replaced = sorted(name for name, times in registered.items() if len(times) > 1)
    if replaced:
        extra["registered_twice"] = replaced
    return CaseResult(
        case=case,
        submitted=len(jobs),
        done=sum(1 for j in jobs if j.status == "completed"),
        never_got_runner=sum(1 for j in jobs if j.runner_assign_time is None),
        runners_created=len(registered),
        registrations_replaced=sum(len(t) - 1 for t in registered.values()),
        orphans=orphan_registrations(world, scale_sets),
        leftovers=sum(len(v) for v in left.values()),
        extra=extra,
    )
