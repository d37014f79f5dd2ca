"""Behaviours B2 and B5 at the runner level, and invalid templates (real API server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _erworld import World, jit_data, runner_template, world_fixture

from gharc.api.scaleset import constants as c
from gharc.kube import errors as kerrors
from gharc.kube.resources import PODS
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    async for w in world_fixture(kubeconfig, namespace):
        yield w


async def _pod_uid(world: World, name: str) -> str | None:
    try:
        pod = await world.kube.get(PODS, name, namespace=world.namespace)
    except kerrors.NotFound:
        return None
    return None if pod["metadata"].get("deletionTimestamp") else pod["metadata"]["uid"]


async def test_b2_evicted_pod_is_failed_fast_and_replaced(world: World) -> None:
    """replicas=1, the pod is evicted: failure recorded, new pod, the runner takes a job."""
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    first = await _pod_uid(world, name)
    await world.run_pod(name)
    await world.evict_pod(name)

    async def new_pod() -> str | None:
        uid = await _pod_uid(world, name)
        return uid if uid and uid != first else None

    await eventually(new_pod, timeout=20, message="a new runner pod")
    runner = await world.runner(name)
    assert list(runner["status"]["failures"]) == [first]
    await world.recorder.seen("PodFailed", name)
    # The evicted runner may have redeemed its single-use JIT config (ARC #4588): the new
    # pod comes with a fresh registration, the old one is removed.
    rid = runner["status"]["runnerId"]
    assert rid != er["status"]["runnerId"]
    assert world.registered() == {rid}
    await world.run_pod(name)
    await eventually(
        lambda: _phase_is(world, name, c.PHASE_RUNNING), message="runner Running again"
    )
    job = await world.take_job(await world.runner(name))
    assert job.runner_id == rid
    assert len(await world.runners()) == 1


@pytest.mark.parametrize("seen_running", [True, False], ids=["seen-running", "before-status"])
async def test_lost_pod_of_a_used_jit_config_gets_a_fresh_registration(
    world: World, seen_running: bool
) -> None:
    """ARC #4588: a runner's pod vanishes (its spot VM deleted, the pod object with it) after
    its runner connected. Its JIT config was redeemed, so a pod re-created from the same
    Secret would be refused and sit idle; the runner registers afresh and its new pod
    connects. ``before-status``: the pod goes before the controller saw it Running (chaos
    used-jit-config once caught the old code re-creating it from the spent Secret)."""
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name, old = er["metadata"]["name"], er["status"]["runnerId"]
    first = await eventually(lambda: _pod_uid(world, name), message="the first pod")
    if seen_running:
        await world.run_pod(name)
        await eventually(lambda: _phase_is(world, name, c.PHASE_RUNNING), message="Running")
    else:
        assert (await world.runner(name))["status"].get("phase") != c.PHASE_RUNNING
    [old_secret] = await world.secrets()
    # The runner connected: its JIT config is spent.
    world.gh.state.redeem_jit_config(jit_data(old_secret)[c.SECRET_KEY_JIT_TOKEN])
    await world.kube.delete(PODS, c.runner_pod_name(name), namespace=world.namespace)
    runner = await _registered_afresh(world, name, first, old)
    assert len(runner["status"]["failures"]) == 1
    assert len(await world.runners()) == 1


async def _registered_afresh(
    world: World, name: str, first: str | None, old: int
) -> dict[str, Any]:
    """Wait for the lost pod's successor and check it came with a fresh registration whose
    config can still be redeemed, the old one removed, and ``PodLost`` said."""

    async def new_pod() -> str | None:
        uid = await _pod_uid(world, name)
        return uid if uid and uid != first else None

    await eventually(new_pod, timeout=20, message="a new runner pod")
    runner = await world.runner(name)
    rid = runner["status"]["runnerId"]
    assert rid != old, "a pod was re-created from a JIT config its lost runner redeemed"
    assert world.registered() == {rid}, "the old registration was not removed"
    [secret] = await world.secrets()
    # The new pod's runner can connect: its config was never redeemed.
    assert world.gh.state.redeem_jit_config(jit_data(secret)[c.SECRET_KEY_JIT_TOKEN]).id == rid
    await world.recorder.seen("PodLost", name)
    return runner


async def test_pod_lost_while_no_controller_ran_gets_a_fresh_registration(world: World) -> None:
    """The runner connected and its pod vanished while the controller was down, before any
    replica saw it Running: nothing here remembers the pod. GitHub shows the registration
    online with no pod in the cluster, so its config was redeemed: the next pod comes with a
    fresh registration, asked once."""
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name, old = er["metadata"]["name"], er["status"]["runnerId"]
    first = await eventually(lambda: _pod_uid(world, name), message="the first pod")
    await world.stop(crash=True)
    [old_secret] = await world.secrets()
    world.gh.state.redeem_jit_config(jit_data(old_secret)[c.SECRET_KEY_JIT_TOKEN])
    await world.kube.delete(PODS, c.runner_pod_name(name), namespace=world.namespace)
    await world.start()
    await _registered_afresh(world, name, first, old)
    assert world.gh.calls("*/agents/{runner_id}", method="GET") == 1


async def test_a_pod_that_could_not_be_made_keeps_its_registration_across_a_restart(
    world: World,
) -> None:
    """The other side of the question: a registration nobody connected with (its pod never
    ran) is offline at GitHub, so a restart keeps it for the next pod."""
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name, rid = er["metadata"]["name"], er["status"]["runnerId"]
    await eventually(lambda: _pod_uid(world, name), message="the first pod")
    await world.stop(crash=True)
    await world.kube.delete(PODS, c.runner_pod_name(name), namespace=world.namespace)
    await world.start()
    await eventually(lambda: _pod_uid(world, name), timeout=20, message="a new runner pod")
    assert (await world.runner(name))["status"]["runnerId"] == rid
    assert world.registered() == {rid}
    assert "PodLost" not in world.recorder.reasons(name)


async def _phase_is(world: World, name: str, phase: str) -> bool:
    try:
        return ((await world.runner(name)).get("status") or {}).get("phase") == phase
    except kerrors.NotFound:
        return False


async def test_b2_evicted_busy_runner_is_replaced(world: World) -> None:
    """A runner that took a job and lost its pod is deleted; the set makes a new one."""
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    await world.run_pod(name)
    await world.take_job(er)
    await eventually(
        lambda: _has_job(world, name), message="listener recorded the job on the runner"
    )
    await world.evict_pod(name)

    async def replaced() -> list[str] | None:
        names = [r["metadata"]["name"] for r in await world.runners(include_deleting=True)]
        return names if names and name not in names else None

    [new] = await eventually(replaced, timeout=20, message="busy runner replaced")
    await world.wait_runners(1)
    assert new != name


async def _has_job(world: World, name: str) -> bool:
    return bool(((await world.runner(name)).get("status") or {}).get("jobId"))


async def test_b2_sixth_failure_marks_runner_failed(world: World) -> None:
    """Five failures re-create the pod (with backoff); the 6th marks the runner Failed,
    removes its registration, and the set deletes it (reported in an event on the set) and
    creates a fresh runner."""
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name, rid = er["metadata"]["name"], er["status"]["runnerId"]
    seen: set[str] = set()
    for i in range(6):
        uid = await eventually(
            lambda: _fresh_pod(world, name, seen), timeout=20, message=f"pod #{i + 1}"
        )
        seen.add(uid)
        await world.exit_pod(name, 1)

    async def reported() -> str | None:
        return next(
            (m for n, _, r, m in world.recorder.events if n == "set" and r == "RunnerFailed"),
            None,
        )

    message = await eventually(reported, timeout=20, message="Failed, reported on the set")
    assert name in message and c.REASON_TOO_MANY_POD_FAILURES in message
    assert "failed 6 times" in message
    assert rid not in world.registered()

    # The set replaces it with a viable runner; the Failed one is deleted.
    async def replacement() -> bool:
        runners = await world.runners()
        others = [r for r in runners if r["metadata"]["name"] != name]
        return len(others) == 1 and bool((others[0].get("status") or {}).get("runnerId"))

    await eventually(replacement, timeout=20, message="replacement runner")
    assert await _pod_uid(world, name) is None


async def _fresh_pod(world: World, name: str, seen: set[str]) -> str | None:
    uid = await _pod_uid(world, name)
    return uid if uid and uid not in seen else None


async def test_b5_completed_runner_is_not_removed_from_github(world: World) -> None:
    """Exit 0: Succeeded, pod and secret gone, and no RemoveRunner call at all."""
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name = er["metadata"]["name"]
    await world.run_pod(name)
    job = await world.take_job(er)
    world.complete_job(job)  # the ephemeral runner de-registers itself
    before = world.remove_calls()
    await world.exit_pod(name, 0)

    async def gone() -> bool:
        names = [r["metadata"]["name"] for r in await world.runners(include_deleting=True)]
        return name not in names

    await eventually(gone, timeout=20, message="finished runner deleted by the set")
    assert await _pod_uid(world, name) is None
    assert world.remove_calls() == before == 0


async def test_invalid_pod_template_is_reported_without_a_hot_loop(world: World) -> None:
    template = runner_template()
    template["spec"]["restartPolicy"] = "Sometimes"  # the CRD allows it, the pod API does not
    await world.create_ers(replicas=2, template=template)

    async def failed() -> list[dict] | None:
        runners = await world.runners()
        ok = len(runners) == 2 and all(
            (r.get("status") or {}).get("reason") == c.REASON_INVALID_POD for r in runners
        )
        return runners if ok else None

    runners = await eventually(failed, timeout=20, message="runners Failed with InvalidPod")
    for r in runners:
        assert r["status"]["phase"] == c.PHASE_FAILED
        assert r["status"]["message"].startswith("Failed to create the pod: ")
        assert "restartPolicy" in r["status"]["message"]
        # The event follows the status write: the status can be seen before the event is.
        await world.recorder.seen(c.REASON_INVALID_POD, r["metadata"]["name"])
    creates = world.kube.request_counts.copy()
    await asyncio.sleep(3)
    # No retry storm: no more pod creates, no replacement runners.
    delta = {k: v - creates.get(k, 0) for k, v in world.kube.request_counts.items()}
    assert sum(v for (verb, res, _), v in delta.items() if verb == "create") == 0, delta
    assert len(await world.runners()) == 2


async def test_invalid_pod_stays_failed_when_the_runner_id_write_lands_last(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runnerId write and the first pod create go out together; on a loaded API server
    the write can land after the create's failure was written. Its Pending must not undo
    Failed: a runner taken for live again lost its secret to the cleanup and was registered
    anew, a registration churn for a template that can never make a pod."""
    patch_status = world.kube.patch_status

    async def runner_id_write_last(*args: Any, **kwargs: Any) -> Any:
        patch = args[2] if len(args) > 2 else kwargs["patch"]
        if "runnerId" in (patch.get("status") or {}):
            await asyncio.sleep(0.5)
        return await patch_status(*args, **kwargs)

    monkeypatch.setattr(world.kube, "patch_status", runner_id_write_last)
    template = runner_template()
    template["spec"]["restartPolicy"] = "Sometimes"
    await world.create_ers(replicas=1, template=template)

    [er] = await eventually(world.runners, timeout=20, message="the runner")
    await world.recorder.seen(c.REASON_INVALID_POD, er["metadata"]["name"], timeout=20)
    await asyncio.sleep(2)  # the delayed write and any reconcile it wakes have landed
    [er] = await world.runners()
    assert er["status"]["phase"] == c.PHASE_FAILED, er["status"]
    assert "RegistrationLost" not in world.recorder.reasons(er["metadata"]["name"])
    assert world.registered() == set()  # its one registration removed, none made again


async def test_exit_code_7_marks_runner_and_set_outdated(world: World) -> None:
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name, rid = er["metadata"]["name"], er["status"]["runnerId"]
    await world.exit_pod(name, c.RUNNER_EXIT_CODE_VERSION_DEPRECATED)

    async def set_outdated() -> bool:
        return ((await world.ers()).get("status") or {}).get("phase") == c.PHASE_OUTDATED

    await eventually(set_outdated, timeout=20, message="EphemeralRunnerSet Outdated")
    assert rid not in world.registered()
    assert await _pod_uid(world, name) is None
    # Outdated: no scaling; the deprecated runner is cleaned up, nothing replaces it.
    await eventually(lambda: _no_runners(world), timeout=20, message="outdated runner removed")
    await asyncio.sleep(1)
    assert await world.runners(include_deleting=True) == []


async def _no_runners(world: World) -> bool:
    return await world.runners(include_deleting=True) == []


async def test_pod_that_never_started_its_runner_keeps_the_registration(world: World) -> None:
    """An init container failed: the runner never ran, its JIT config is unused, so the
    next pod reuses it instead of spending a registration."""
    await world.create_ers(replicas=1)
    [er] = await world.wait_runners(1)
    name, rid = er["metadata"]["name"], er["status"]["runnerId"]
    first = await _pod_uid(world, name)
    await world.pod_status(
        name,
        {
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "init",
                    "ready": False,
                    "restartCount": 0,
                    "image": "init:1",
                    "imageID": "",
                    "state": {"terminated": {"exitCode": 1, "reason": "Error"}},
                }
            ],
        },
    )

    async def new_pod() -> str | None:
        uid = await _pod_uid(world, name)
        return uid if uid and uid != first else None

    await eventually(new_pod, timeout=20, message="a new runner pod")
    runner = await world.runner(name)
    assert runner["status"]["runnerId"] == rid
    assert list(runner["status"]["failures"]) == [first]
    assert world.registered() == {rid}
