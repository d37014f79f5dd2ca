"""Failed EphemeralRunners are deleted and replaced by the set, at a bounded rate (ARC #3729)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from _erworld import World, make_world

from gharc.api.scaleset import constants as c
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    # One failed pod marks the runner Failed; the second replacement in a row waits 4 s.
    w, close = await make_world(
        kubeconfig, namespace, runner_max_failures=0, failed_runner_replace_backoff=(0.0, 4.0)
    )
    try:
        yield w
    finally:
        await close()


async def _fail(world: World, er: dict) -> None:
    """Evict the runner's pod and wait for the ER controller to give up on it."""
    name = er["metadata"]["name"]
    await world.run_pod(name)
    await world.evict_pod(name)

    async def failed() -> bool:
        try:
            runner = await world.runner(name)
        except Exception:
            return True  # already deleted by the set
        return (runner.get("status") or {}).get("phase") == c.PHASE_FAILED

    await eventually(failed, timeout=20, message=f"{name} Failed")


async def _names(world: World) -> set[str]:
    return {r["metadata"]["name"] for r in await world.runners(include_deleting=True)}


def _events(world: World, reason: str) -> list[str]:
    return [m for n, t, r, m in world.recorder.events if n == "set" and r == reason]


async def test_failed_runner_is_deleted_reported_and_replaced(world: World) -> None:
    await world.create_ers(replicas=1, patch_id=1)
    [er] = await world.wait_runners(1)
    name, rid = er["metadata"]["name"], er["status"]["runnerId"]
    await _fail(world, er)

    async def replaced() -> list[dict] | None:
        runners = await world.runners(include_deleting=True)
        ok = [r["metadata"]["name"] for r in runners] != [name] and name not in await _names(world)
        return runners if ok and len(runners) == 1 else None

    [new] = await eventually(replaced, timeout=30, message="failed runner deleted and replaced")
    assert new["metadata"]["name"] != name
    assert rid not in world.registered()
    [message] = _events(world, "RunnerFailed")
    assert name in message and c.REASON_TOO_MANY_POD_FAILURES in message
    # The replacement takes the queued job.
    [new] = await world.wait_runners(1)
    await world.run_pod(new["metadata"]["name"])
    job = await world.take_job(new)
    assert job.runner_id == new["status"]["runnerId"]


async def test_failures_in_a_row_are_replaced_with_backoff(world: World) -> None:
    await world.create_ers(replicas=1, patch_id=1)
    [first] = await world.wait_runners(1)
    await _fail(world, first)

    async def one_other_than(name: str) -> list[dict] | None:
        runners = await world.runners(include_deleting=True)
        ok = len(runners) == 1 and runners[0]["metadata"]["name"] != name
        return runners if ok and (runners[0].get("status") or {}).get("runnerId") else None

    [second] = await eventually(
        lambda: one_other_than(first["metadata"]["name"]), timeout=30, message="replaced"
    )
    await world.wait_runners(1)
    await _fail(world, second)
    # The second failure in a row: kept (and counted) until the backoff ends, and said so.
    await eventually(
        lambda: _true(bool(_events(world, "FailedRunnerBackoff"))), message="backoff event"
    )
    assert await _names(world) == {second["metadata"]["name"]}
    assert second["metadata"]["name"] in _events(world, "FailedRunnerBackoff")[0]
    # ... then replaced without any new trigger (the requeue the backoff asked for).
    await eventually(
        lambda: one_other_than(second["metadata"]["name"]), timeout=30, message="replaced late"
    )
    assert len(_events(world, "RunnerFailed")) == 2


async def _true(value: bool) -> bool:
    return value


async def test_replace_backoff_survives_a_controller_restart(
    kubeconfig: str, namespace: str
) -> None:
    """The ladder's step is kept on the set: after a restart the next Failed runner still
    waits its 30 s, and the FailedRunnerBackoff condition says so (was: reset in memory)."""
    world, close = await make_world(
        kubeconfig, namespace, runner_max_failures=0, failed_runner_replace_backoff=(0.0, 30.0)
    )
    try:
        await world.create_ers(replicas=1, patch_id=1)
        [first] = await world.wait_runners(1)
        await _fail(world, first)

        async def replaced_once() -> dict | None:
            ers = await world.ers()
            status = ers.get("status") or {}
            return ers if status.get("failedRunnerReplacements") == 1 else None

        ers = await eventually(replaced_once, timeout=20, message="1 replacement recorded")
        assert ers["status"]["lastFailedRunnerReplacementTime"]
        [second] = await eventually(
            lambda: _live_other_than(world, first["metadata"]["name"]),
            timeout=20,
            message="the replacement runner",
        )
        await world.stop()
        await world.start()
        await _fail(world, second)

        async def held_back() -> dict | None:
            conditions = ((await world.ers()).get("status") or {}).get("conditions") or []
            found = next((x for x in conditions if x["type"] == "FailedRunnerBackoff"), None)
            return found if found and found["status"] == "True" else None

        condition = await eventually(held_back, timeout=20, message="backoff condition")
        assert second["metadata"]["name"] in condition["message"]
        assert second["metadata"]["name"] in await _names(world)  # held, not replaced
        assert not any(second["metadata"]["name"] in m for m in _events(world, "RunnerFailed"))
    finally:
        await close()


async def _live_other_than(world: World, name: str) -> list[dict] | None:
    runners = [r for r in await world.runners() if r["metadata"]["name"] != name]
    ready = [r for r in runners if (r.get("status") or {}).get("runnerId")]
    return ready or None
