"""The simulated runner redeems its JIT config, runs one job and de-registers itself."""

from __future__ import annotations

import asyncio

from testworld.sim.github import FakeGitHubServer
from testworld.sim.kubelet import ContainerContext
from testworld.sim.programs import RunnerProgram
from testworld.wait import eventually

#: The fake's runner routes, as counted by ``gh.calls``: waits are on these, not on sleeps.
CONNECT = "/_runner/connect"


def context(encoded: str) -> ContainerContext:
    pod = {"metadata": {"name": "r-1", "namespace": "ns"}, "spec": {}}
    return ContainerContext(
        pod=pod,
        container={"name": "runner"},
        env={"ACTIONS_RUNNER_INPUT_JITCONFIG": encoded},
        files={},
    )


async def setup_scale_set(gh: FakeGitHubServer) -> tuple[int, str]:
    tenant = gh.state.tenant_for("org", "octo-org")
    ss = gh.state.create_scale_set(
        tenant, {"name": "sim-set", "runnerGroupId": 1, "labels": [{"name": "sim-set"}]}
    )
    _, encoded = gh.state.generate_jit_config(tenant, ss.id, "r-1", "_work")
    return ss.id, encoded


async def test_runner_takes_an_assigned_job_and_completes_it() -> None:
    async with FakeGitHubServer(poll_timeout=1.0) as gh:
        ss_id, encoded = await setup_scale_set(gh)
        job = gh.enqueue_job("octo-org/octo-repo", ["sim-set"], duration=0.2, result="failed")
        ss = gh.state.scale_sets[ss_id]
        assert gh.state.acquire_jobs(ss, [job.request_id]) == [job.request_id]
        code = await asyncio.wait_for(RunnerProgram(poll_seconds=1).run(context(encoded)), 10)
        assert code == 0
        done = gh.state.job(job.request_id)
        assert done.status == "completed"
        assert done.result == "failed"  # the job's result, not the runner's exit code
        assert not gh.state.runners, "an ephemeral runner de-registers after its job"


async def test_idle_runner_stops_cleanly_when_told_to() -> None:
    async with FakeGitHubServer(poll_timeout=1.0) as gh:
        _, encoded = await setup_scale_set(gh)
        ctx = context(encoded)
        task = asyncio.create_task(RunnerProgram(poll_seconds=5).run(ctx))
        await eventually(lambda: gh.calls(CONNECT, status=200) == 1, message="connected")
        ctx.stop.set()
        assert await asyncio.wait_for(task, 5) == 0


async def test_runner_with_a_garbage_jit_config_exits_non_zero() -> None:
    assert await RunnerProgram().run(context("not-base64!")) == 1


async def test_a_replacement_pod_with_the_used_jit_config_is_a_zombie() -> None:
    """A JIT config is single-use (ARC #4588): a second process with it is refused with
    Conflict and retries until stopped, idle, while a job waits for its scale set; once the
    registration is removed it exits 1."""
    async with FakeGitHubServer(poll_timeout=5.0) as gh:
        ss_id, encoded = await setup_scale_set(gh)
        first = asyncio.create_task(RunnerProgram(poll_seconds=5).run(context(encoded)))
        await eventually(lambda: gh.calls(CONNECT, status=200) == 1, message="connected")
        first.cancel()  # the pod is lost: no disconnect is sent
        await asyncio.gather(first, return_exceptions=True)
        job = gh.enqueue_job("octo-org/octo-repo", ["sim-set"], duration=0.1)
        gh.state.acquire_jobs(gh.state.scale_sets[ss_id], [job.request_id])
        second = asyncio.create_task(RunnerProgram(poll_seconds=5).run(context(encoded)))
        await eventually(lambda: gh.calls(CONNECT, status=409) >= 2, message="refused twice")
        assert not second.done()
        assert gh.state.job(job.request_id).status == "assigned"
        assert gh.state.job(job.request_id).runner_id is None
        (rid,) = list(gh.state.runners)
        gh.state.remove_runner(None, rid)
        assert await asyncio.wait_for(second, 5) == 1


async def test_a_second_process_is_refused_while_the_first_still_polls() -> None:
    async with FakeGitHubServer(poll_timeout=5.0) as gh:
        _, encoded = await setup_scale_set(gh)
        ctx = context(encoded)
        first = asyncio.create_task(RunnerProgram(poll_seconds=5).run(ctx))
        await eventually(lambda: gh.calls(CONNECT, status=200) == 1, message="first connected")
        code = await RunnerProgram(conflict_retries=1).run(context(encoded))
        assert code == 1  # the session conflict did not clear: exit non-zero
        ctx.stop.set()
        assert await asyncio.wait_for(first, 10) == 0


async def test_a_long_job_is_renewed_so_its_runner_is_never_lost() -> None:
    """The fake fails the job of a runner silent for ``runner_lost_timeout``; a runner
    that renews its job more often than that keeps it."""
    async with FakeGitHubServer(poll_timeout=1.0) as gh:
        gh.sweep_interval = 0.05
        gh.state.runner_lost_timeout = 0.3
        ss_id, encoded = await setup_scale_set(gh)
        job = gh.enqueue_job("octo-org/octo-repo", ["sim-set"], duration=1.0)
        gh.state.acquire_jobs(gh.state.scale_sets[ss_id], [job.request_id])
        program = RunnerProgram(poll_seconds=1, renew_seconds=0.1)
        assert await asyncio.wait_for(program.run(context(encoded)), 10) == 0
        assert job.conclusion == "succeeded"
        assert gh.calls("/_runner/jobs/{request_id}", method="GET") >= 5
