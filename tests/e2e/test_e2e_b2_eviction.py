"""B2 end to end: an evicted runner pod is never counted as a viable runner."""

from __future__ import annotations

from typing import Any

import pytest
from _e2e import all_completed, enqueue_jobs, job_state, wait_until

from testworld.world import World

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def _viable_runners(world: World, ns: str, *, exclude: set[str]) -> list[dict[str, Any]]:
    """EphemeralRunners in phase Running, not being deleted, whose pod runs, minus ``exclude``
    (names of runners that must not count: the evicted one)."""
    pods = {p["metadata"]["name"]: p for p in await world.pods(ns)}
    out = []
    for er in await world.ephemeral_runners(ns):
        name = er["metadata"]["name"]
        if name in exclude or er["metadata"].get("deletionTimestamp"):
            continue
        pod = pods.get(name)
        er_running = (er.get("status") or {}).get("phase") == "Running"
        if er_running and pod is not None and (pod.get("status") or {}).get("phase") == "Running":
            out.append(er)
    return out


async def test_busy_runner_evicted_then_new_job_picked_up(world: World) -> None:
    ns = world.controller_namespace
    await world.apply_scale_set(ns, "evict-busy", max_runners=3)
    await world.wait_for_listener("evict-busy")
    (long_job,) = enqueue_jobs(world, ["evict-busy"], 1, durations=(120, 120))
    await wait_until(lambda: long_job.status == "running", 60, "the job to run", world=world)
    victim = long_job.runner_name
    assert victim is not None
    assert world.kubelet is not None
    world.kubelet.evict(ns, victim)

    async def evicted_gone() -> bool:
        names = {er["metadata"]["name"] for er in await world.ephemeral_runners(ns)}
        return victim not in names

    await wait_until(evicted_gone, 60, f"the evicted runner {victim} to be replaced", world=world)
    # The evicted runner's job is still "running" at GitHub (assigned jobs = 1), so the set
    # keeps one runner: the replacement, which must be viable.
    await wait_until(
        lambda: _viable_runners(world, ns, exclude={victim}),
        60,
        "a viable replacement runner",
        world=world,
    )
    jobs = enqueue_jobs(world, ["evict-busy"], 2, durations=(0.2, 0.5), seed=3)
    await wait_until(lambda: all_completed(jobs), 90, "new jobs after the eviction", world=world)
    assert all(j.runner_name != victim for j in jobs), job_state(jobs)


async def test_idle_runner_evicted_is_replaced(world: World) -> None:
    ns = world.controller_namespace
    await world.apply_scale_set(ns, "evict-idle", min_runners=1, max_runners=2)
    await world.wait_for_listener("evict-idle")
    await wait_until(
        lambda: _viable_runners(world, ns, exclude=set()), 60, "an idle runner", world=world
    )
    (idle,) = await _viable_runners(world, ns, exclude=set())
    victim = idle["metadata"]["name"]
    victim_pod_uid = next(
        p["metadata"]["uid"] for p in await world.pods(ns) if p["metadata"]["name"] == victim
    )
    assert world.kubelet is not None
    world.kubelet.evict(ns, victim)

    async def viable_again() -> bool:
        pods = {p["metadata"]["uid"] for p in await world.pods(ns)}
        alive = await _viable_runners(world, ns, exclude=set())
        # A viable runner on a pod other than the evicted one (a fresh pod for the same
        # EphemeralRunner, or a new EphemeralRunner).
        return bool(alive) and (
            victim_pod_uid not in pods
            or len(alive) > 1
            or any(er["metadata"]["name"] != victim for er in alive)
        )

    await wait_until(viable_again, 60, "a viable runner after the idle eviction", world=world)
    jobs = enqueue_jobs(world, ["evict-idle"], 1, durations=(0.2, 0.5))
    await wait_until(lambda: all_completed(jobs), 60, "a job after the eviction", world=world)
