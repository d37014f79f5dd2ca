"""EphemeralRunner: a lost ``generatejitconfig`` answer never leaves a job queued (G7).

GitHub makes the registration, then the answer is lost (a proxy's 502, a dropped
connection). The runner name is now taken at GitHub by a registration whose JIT config
nobody holds: every retry gets 409 AgentExists. The reconciler must find that
registration by name, remove it and register again within a bounded budget, so the
runner comes up, redeems its config and takes the job.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, jit_data, world_fixture

from gharc.api.scaleset import constants as c
from gharc.kube.resources import SECRETS
from testworld.sim.github import DEFAULT_REPO
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


JIT = "*/runnerscalesets/{scale_set_id}/generatejitconfig"


async def _runner_takes_a_job(world: World, timeout: float = 30, *, only: bool = True) -> None:
    """The registered runner's config works: it connects and GitHub gives it the job.
    ``only``: its registration is the only one of the scale set."""
    [er] = await world.wait_runners(1, timeout=timeout)
    name = er["metadata"]["name"]
    rid = int(er["status"]["runnerId"])
    st = world.gh.state
    # The JIT secret holds a live registration, the only one unless told otherwise.
    assert rid in world.registered()
    if only:
        assert world.registered() == {rid}
    secret = await world.kube.get(
        SECRETS, c.runner_jit_secret_name(name), namespace=world.namespace
    )
    data = jit_data(secret)
    runner = st.redeem_jit_config(data["jitToken"])
    assert runner.id == rid
    job = st.enqueue_job(DEFAULT_REPO, list(world.scale_set.labels))
    st.acquire_jobs(world.scale_set, [job.request_id])
    taken = st.take_job(runner)
    assert taken is not None and taken.request_id == job.request_id


async def test_lost_jit_answer_is_recovered_and_the_runner_takes_the_job(world: World) -> None:
    """Every answer of the service is lost while the fault lasts (the transport's own
    retries included): each attempt stores a registration or gets AgentExists. Once the
    answers come back the runner must register within a bounded number of calls."""
    world.gh.add_fault("lost_response", route=JIT, method="POST", count=3)
    await world.create_ers(replicas=1, patch_id=1)
    await _runner_takes_a_job(world)
    assert world.gh.calls(JIT, method="POST") <= 10
    await world.recorder.seen("RegistrationReplaced")


async def test_a_name_that_cannot_be_freed_is_given_up_for_a_new_runner(world: World) -> None:
    """The name lookup never shows the registration (GitHub's read lags its write, or the
    lookup fails): the reconciler neither spins nor waits forever on that name; after its
    budget the EphemeralRunner is replaced by one with a fresh name, which registers."""
    world.gh.add_fault("lost_response", route=JIT, method="POST", count=1)
    world.gh.add_fault("status", route="*/pools/0/agents", method="GET", status=404)
    await world.create_ers(replicas=1, patch_id=1)
    first = (await eventually(world.runners, timeout=10, message="a runner"))[0]
    # The lost registration cannot be found by name, so it stays until the orphan
    # reconcile (orphans.py) removes it; the job is not held up by it.
    await _runner_takes_a_job(world, timeout=60, only=False)
    [er] = await world.runners()
    assert er["metadata"]["name"] != first["metadata"]["name"]
    await world.recorder.seen("RegistrationConflict", first["metadata"]["name"])
    assert world.gh.calls(JIT, method="POST") <= 10


async def test_lost_jit_answer_does_not_leave_two_registrations(world: World) -> None:
    world.gh.add_fault("lost_response", route=JIT, method="POST", count=1)
    await world.create_ers(replicas=2, patch_id=1)
    runners = await world.wait_runners(2, timeout=60)
    ids = {int(r["status"]["runnerId"]) for r in runners}

    async def only_theirs() -> bool:
        return world.registered() == ids

    await eventually(only_theirs, timeout=10, message="exactly the two live registrations")
