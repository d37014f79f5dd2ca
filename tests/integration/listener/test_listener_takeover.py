"""A dead listener's message session is taken over by its successor (no-job-stranded §1).

A listener that dies without deleting its session leaves it alive at GitHub; the fake,
like the service for minutes, answers a second create with 409. Before the session was
recorded on the EphemeralRunnerSet, the successor waited that out with no runner created
for any job meanwhile. These tests "kill" a listener by cancelling its task (no stop, so no
session delete), or with SIGKILL for a real process, and count what the successor asks of GitHub.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pytest
from listener_world import ERS_NAME, World, in_process, spawn

from gharc.api.scaleset.constants import ANNOTATION_MESSAGE_SESSION_ID
from gharc.kube.config import new_api_client
from gharc.listener.app import Listener, build_actions_client
from gharc.listener.runnerset_writes import KubePatcher
from testworld.wait import eventually

pytestmark = pytest.mark.cluster


async def _recorded(world: World) -> str | None:
    annotations = (await world.ers())["metadata"].get("annotations") or {}
    value = annotations.get(ANNOTATION_MESSAGE_SESSION_ID)
    return str(value) if value else None


async def _kill(task: asyncio.Task[None]) -> None:
    """Cancel the loop as a crash would end it: no stop request, so no session delete."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def test_session_is_recorded_and_cleared_on_a_clean_stop(world: World) -> None:
    async with in_process(world) as listener:
        await eventually(lambda: _recorded(world), timeout=10, message="session recorded")
        session = listener.sessions.session
        assert session is not None
        assert await _recorded(world) == session.session_id
    assert world.active_session() is None
    assert await _recorded(world) is None


async def test_successor_resumes_a_dead_listeners_session(world: World) -> None:
    cfg = world.listener_config(session_conflict_attempts=3)
    patcher = KubePatcher(
        await new_api_client(kubeconfig=world.kubeconfig, pool_size=4), world.namespace, ERS_NAME
    )
    api = build_actions_client(cfg)
    first = Listener(cfg, api, patcher, owner="first")
    task = asyncio.create_task(first.run())
    try:
        await eventually(lambda: _recorded(world), timeout=10)
        dead_session = world.active_session()
        assert dead_session is not None
        await _kill(task)  # abandoned mid-poll, as a SIGKILL would leave it
    finally:
        await api.aclose()
        await patcher.aclose()
    assert world.active_session() is dead_session  # still held at GitHub
    creates_before = world.gh.calls("*/sessions", method="POST")
    async with in_process(world, session_conflict_attempts=3) as second:
        await eventually(lambda: _true(second.polls >= 1), timeout=10, message="polling")
        assert second.sessions.taken_over == dead_session.id
        (rid,) = world.enqueue(1)
        await eventually(lambda: _first(world.spec(), 1), timeout=10, message="job scaled")
    # Resumed, not re-created: no create call at all, so no 409 loop.
    assert world.gh.calls("*/sessions", method="POST") == creates_before
    assert rid


async def test_sigkilled_listener_process_is_replaced_within_seconds(world: World) -> None:
    config_path = world.write_config()
    first = await spawn(world, config_path)
    try:
        await eventually(lambda: _recorded(world), timeout=30, message="first session")
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    assert world.active_session() is not None  # the kill left it behind
    creates_before = world.gh.calls("*/sessions", method="POST")
    second = await spawn(world, config_path)
    try:
        (rid,) = world.enqueue(1)
        await eventually(lambda: _first(world.spec(), 1), timeout=30, message="job scaled")
    finally:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.communicate(), timeout=15)
    # A process start plus one resume, not the minutes of a 409 wait: the successor created
    # no session at all (the chaos suite prints how many seconds that takes).
    assert world.gh.calls("*/sessions", method="POST") == creates_before, world.gh.call_table()
    assert second.returncode == 0
    assert rid


async def _first(value: object, expected: int) -> bool:
    return bool((await value)[0] == expected)  # type: ignore[misc]


async def _true(value: bool) -> bool:
    return value


async def test_successor_continues_the_patch_ids_of_the_runner_set(world: World) -> None:
    """A listener life never starts at the un-suppressible ID 0 after another one (B3)."""
    await _set_patch_id(world, 17)
    async with in_process(world) as listener:
        await eventually(lambda: _true(bool(listener.patcher.sent)), timeout=10)  # type: ignore[attr-defined]
        assert listener.patcher.sent[0][1] == 18  # type: ignore[attr-defined]


async def _set_patch_id(world: World, patch_id: int) -> None:
    from kubernetes_asyncio import client

    from gharc.api.scaleset.constants import GROUP, PLURAL_EPHEMERAL_RUNNER_SETS, VERSION

    await client.CustomObjectsApi(world.api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        world.namespace,
        PLURAL_EPHEMERAL_RUNNER_SETS,
        ERS_NAME,
        {"spec": {"patchID": patch_id}},
        _content_type="application/merge-patch+json",
    )
