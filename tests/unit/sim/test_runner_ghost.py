"""A registration GitHub deleted while its runner process lives on (ARC #4396, #4399).

The process keeps polling, is never given a job (jobs queue for the scale set's other
runners), and does not exit on its own: a zombie, until the controller replaces it.
"""

from __future__ import annotations

import asyncio

from testworld.sim.github import FakeGitHubServer
from testworld.sim.kubelet import ContainerContext
from testworld.sim.programs import RunnerProgram
from testworld.wait import eventually

#: The fake's runner routes, as counted by ``gh.calls``: waits are on these, not on sleeps.
CONNECT = "/_runner/connect"
POLL = "/_runner/jobs/next"


def context(encoded: str) -> ContainerContext:
    pod = {"metadata": {"name": "r-1", "namespace": "ns"}, "spec": {}}
    return ContainerContext(
        pod=pod,
        container={"name": "runner"},
        env={"ACTIONS_RUNNER_INPUT_JITCONFIG": encoded},
        files={},
    )


async def test_runner_whose_registration_was_deleted_idles_and_gets_no_job() -> None:
    async with FakeGitHubServer(poll_timeout=0.5) as gh:
        st = gh.state
        tenant = st.tenant_for("org", "octo-org")
        ss = st.create_scale_set(
            tenant, {"name": "sim-set", "runnerGroupId": 1, "labels": [{"name": "sim-set"}]}
        )
        runner, encoded = st.generate_jit_config(tenant, ss.id, "r-1", "_work")
        ctx = context(encoded)
        task = asyncio.create_task(RunnerProgram(poll_seconds=0.3).run(ctx))
        await eventually(lambda: gh.calls(CONNECT, status=200) == 1, message="connected")
        st.delete_registration_keep_process(runner.id)
        assert runner.id not in st.runners
        job = gh.enqueue_job("octo-org/octo-repo", ["sim-set"], duration=0.1)
        st.acquire_jobs(ss, [job.request_id])
        polls = gh.calls(POLL)
        await eventually(lambda: gh.calls(POLL) >= polls + 3, message="several more polls")
        assert not task.done(), "the process lives on"
        assert st.job(job.request_id).runner_id is None, "and is never given the job"
        # A new registration of the scale set takes it.
        _, fresh = st.generate_jit_config(tenant, ss.id, "r-2", "_work")
        code = await asyncio.wait_for(RunnerProgram(poll_seconds=0.3).run(context(fresh)), 10)
        assert code == 0 and st.job(job.request_id).status == "completed"
        ctx.stop.set()
        assert await asyncio.wait_for(task, 5) == 0
