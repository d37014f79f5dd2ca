"""EphemeralRunnerSet scaling: B3 (patch IDs), B5 (busy runners), 0 -> 20 -> 0, restarts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from _erworld import World, world_fixture

from gharc.api.resources import EPHEMERAL_RUNNER_SETS, EPHEMERAL_RUNNERS
from gharc.kube import errors as kerrors
from gharc.kube.resources import PODS
from testworld.sim.github import Job
from testworld.wait import consistently, eventually

pytestmark = pytest.mark.cluster

ER_LABEL = str(EPHEMERAL_RUNNERS)


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


def runners_created(world: World) -> int:
    return sum(
        n
        for (verb, res, code), n in world.kube.request_counts.items()
        if verb == "create" and res == ER_LABEL and code.startswith("2")
    )


async def test_scale_0_to_20_to_0(world: World) -> None:
    await world.create_ers(replicas=0)
    await consistently(
        lambda: _count(world, 0), seconds=1, message="no runners while replicas is 0"
    )
    await world.scale(20, 1)
    await world.wait_runners(20, timeout=60)
    ers = await eventually(
        lambda: _status_is(world, currentReplicas=20), timeout=20, message="status 20"
    )
    assert ers["status"]["pendingEphemeralRunners"] == 20
    await eventually(
        lambda: _true(world.gauge("pending_ephemeral_runners") == 20), message="gauge 20"
    )
    assert len(world.registered()) == 20
    # Runners not online yet are spared by scale down (test_ephemeralrunnerset_pending.py).
    for r in await world.runners():
        await world.run_pod(r["metadata"]["name"])
    await world.scale(0, 0)
    await eventually(lambda: _count(world, 0, deleting=True), timeout=60, message="0 runners")
    assert world.registered() == set()
    assert await world.pods() == []
    assert await world.secrets() == []
    assert runners_created(world) == 20
    await eventually(lambda: _status_is(world, currentReplicas=0), message="status 0")


async def _true(value: bool) -> bool:
    return value


async def _count(world: World, n: int, *, deleting: bool = False) -> bool:
    return len(await world.runners(include_deleting=deleting)) == n


async def _status_is(world: World, **fields: int) -> dict | None:
    ers = await world.ers()
    status = ers.get("status") or {}
    return ers if all(status.get(k) == v for k, v in fields.items()) else None


async def test_b5_scale_down_never_deletes_a_busy_runner(world: World) -> None:
    await world.create_ers()
    await world.scale(3, 1)
    runners = await world.wait_runners(3)
    for r in runners:
        await world.run_pod(r["metadata"]["name"])
    busy = runners[0]
    await world.take_job(busy)
    # The listener has not yet recorded the job on a second runner: GitHub knows it is busy.
    racing = runners[1]
    st = world.gh.state
    job = st.enqueue_job("octo-org/octo-repo", list(world.scale_set.labels))
    st.acquire_jobs(world.scale_set, [job.request_id])
    st.runners[racing["status"]["runnerId"]].job = job.request_id
    job.runner_id = racing["status"]["runnerId"]

    await world.scale(0, 0)

    async def only_busy_left() -> bool:
        names = {r["metadata"]["name"] for r in await world.runners(include_deleting=True)}
        return names == {busy["metadata"]["name"], racing["metadata"]["name"]}

    await eventually(only_busy_left, timeout=20, message="idle runner scaled down")
    await consistently(only_busy_left, seconds=2, message="busy runners kept")
    assert busy["status"]["runnerId"] in world.registered()
    assert racing["status"]["runnerId"] in world.registered()
    for r in (busy, racing):
        pod = await world.kube.get(PODS, r["metadata"]["name"], namespace=world.namespace)
        assert not pod["metadata"].get("deletionTimestamp")


async def test_b3_no_runner_for_a_job_that_already_finished(world: World) -> None:
    """A job completes while the last patch still counts it: no replacement until a new patch."""
    await world.create_ers()
    await world.scale(2, 1)
    a, b = await world.wait_runners(2)
    for r in (a, b):
        await world.run_pod(r["metadata"]["name"])
    job_a = await world.take_job(a)
    await world.take_job(b)
    world.complete_job(job_a)
    await world.exit_pod(a["metadata"]["name"], 0)  # patch (2, 1) is now stale

    async def a_gone() -> bool:
        names = {r["metadata"]["name"] for r in await world.runners(include_deleting=True)}
        return names == {b["metadata"]["name"]}

    await eventually(a_gone, timeout=20, message="finished runner cleaned up")
    ers = await world.ers()
    assert ers["status"]["finishedRunnerCleanupPatchID"] == 1
    await consistently(a_gone, seconds=2, message="no runner created for the finished job")
    assert runners_created(world) == 2
    # The listener's next patch: one job still running -> replicas 1; still nothing to do.
    await world.scale(1, 2)
    await consistently(a_gone, seconds=1, message="replicas 1 is met")
    # A new job: a new patch ID, a new runner.
    await world.scale(2, 3)
    await world.wait_runners(2)
    assert runners_created(world) == 3


async def test_b3_runners_created_equal_jobs_over_many_cycles(world: World) -> None:
    """Overlapping jobs; each completion is seen under a stale patch first."""
    jobs_total = 100
    await world.create_ers()
    seq = 0
    open_jobs: list[Job] = []
    previous: tuple[Job, str] | None = None

    async def publish() -> None:
        nonlocal seq
        seq += 1
        await world.scale(len(open_jobs), seq)

    for _ in range(jobs_total):
        open_jobs.append(Job.__new__(Job))  # placeholder: the job exists once a runner takes it
        await publish()
        busy = {previous[1]} if previous else set()

        async def idle_runner(busy: set[str] = busy) -> dict | None:
            # Not a finished runner whose cleanup is still under way: its pod has exited.
            pods = {
                p["metadata"]["name"]
                for p in await world.pods()
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            }
            for r in await world.runners():
                st = r.get("status") or {}
                name = r["metadata"]["name"]
                if name not in busy and st.get("runnerId") and name in pods:
                    return r
            return None

        er = await eventually(idle_runner, timeout=20, message="a runner for the new job")
        await world.run_pod(er["metadata"]["name"])
        job = await world.take_job(er)
        open_jobs[-1] = job
        if previous is not None:
            done, name = previous
            world.complete_job(done)
            await world.exit_pod(name, 0)  # seen under the stale patch first
            await asyncio.sleep(0.3)
            open_jobs.remove(done)
            await publish()  # the listener's JobCompleted patch
        previous = (job, er["metadata"]["name"])
    assert previous is not None
    world.complete_job(previous[0])
    await world.exit_pod(previous[1], 0)
    open_jobs.remove(previous[0])
    await publish()
    await eventually(lambda: _count(world, 0, deleting=True), timeout=30, message="all done")
    await asyncio.sleep(0.5)
    assert runners_created(world) == jobs_total


async def test_restart_mid_cleanup_loses_nothing_and_duplicates_nothing(world: World) -> None:
    await world.create_ers()
    await world.scale(6, 1)
    runners = await world.wait_runners(6)
    ids = {r["status"]["runnerId"] for r in runners}
    world.gh.add_fault("latency", route="*agents/{*", method="DELETE", delay=0.4)
    await world.kube.delete(EPHEMERAL_RUNNER_SETS, "set", namespace=world.namespace)
    await eventually(lambda: _removed_some(world, ids), timeout=20, message="cleanup under way")
    await world.stop(crash=True)  # the controller dies half-way through
    assert world.registered() & ids, "the cleanup should not have finished yet"
    world.gh.clear_faults()
    await world.start()

    async def ers_gone() -> bool:
        try:
            await world.ers()
        except kerrors.NotFound:
            return True
        return False

    await eventually(ers_gone, timeout=60, message="EphemeralRunnerSet gone")
    assert await world.runners(include_deleting=True) == []
    assert world.registered() == set()
    assert set(world.gh.state.removed_runners) == ids
    assert len(world.gh.state.removed_runners) == len(ids)
    assert await world.pods() == []
    assert await world.secrets() == []
    assert runners_created(world) == 6


async def _removed_some(world: World, ids: set[int]) -> bool:
    return bool(set(world.gh.state.removed_runners) & ids)


async def test_a_short_job_costs_its_set_one_status_write(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where each set sees a job now and then (a thousand quiet sets), every status write
    of the set is one of its AutoscalingRunnerSet too. A job that ends before its Pending
    count settled costs the cleanup marker alone, which already counts the finished
    runner as gone (the settle is stretched here so the test's own pace cannot decide)."""
    from gharc.controllers.scaleset import ephemeralrunnerset
    from gharc.controllers.scaleset.ephemeralrunnerset import STATUS_INTERVAL

    monkeypatch.setattr(ephemeralrunnerset, "STATUS_SETTLE", 30.0)
    await world.create_ers()
    await asyncio.sleep(STATUS_INTERVAL + 0.5)
    label = f"{EPHEMERAL_RUNNER_SETS}/status"

    def status_writes() -> int:
        return sum(
            n
            for (verb, res, code), n in world.kube.request_counts.items()
            if verb == "patch" and res == label and code.startswith("2")
        )

    before = status_writes()
    await world.scale(1, 1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    await world.run_pod(name)
    job = await world.take_job(await world.runner(name))
    world.complete_job(job)
    await world.exit_pod(name, 0)

    async def gone() -> bool:
        return not await world.runners(include_deleting=True)

    await eventually(gone, timeout=20, message="the finished runner gone")
    await asyncio.sleep(STATUS_INTERVAL + 0.5)  # any write held back is made by now
    status = (await world.ers())["status"]
    assert status["currentReplicas"] == 0 and status["deletingEphemeralRunners"] == 0
    assert status["finishedEphemeralRunners"] == 0
    assert status_writes() - before == 1, f"{status_writes() - before} status writes for one job"
