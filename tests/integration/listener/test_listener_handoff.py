"""Stopping for good hands the scale set to ARC at once; a normal stop keeps the session.

The in-process :class:`ListenerHost` runs a listener against the fake GitHub and the real
API server and is stopped; its successor is either another gharc listener (which resumes
the recorded session) or one that behaves as ARC's does: it knows no recorded session,
creates a new one and retries each 409 until the service has dropped the old one. The
fake drops an idle session after ``session_idle_timeout`` (120 s, as the service does in
about two minutes), which is what a rollback to ARC used to wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from listener_world import ERS_NAME, World

from gharc.api.scaleset.constants import ANNOTATION_MESSAGE_SESSION_ID
from gharc.kube.client import KubeClient
from gharc.kube.config import new_api_client
from gharc.listener.app import Listener, build_actions_client
from gharc.listener.host import ListenerHost
from gharc.listener.metrics import ListenerMetrics
from gharc.listener.runnerset_writes import KubePatcher
from testworld.sim.github import DEFAULT_ORG
from testworld.wait import eventually

pytestmark = pytest.mark.cluster

KEY = ("ctrl-ns", "lst-set-listener")
PICKUP_LIMIT = 60.0
"""The issue's bound for the successor's first job after gharc stopped for good."""


async def _recorded(world: World) -> str | None:
    annotations = (await world.ers())["metadata"].get("annotations") or {}
    value = annotations.get(ANNOTATION_MESSAGE_SESSION_ID)
    return str(value) if value else None


@contextlib.asynccontextmanager
async def _gharc(world: World, *, release_on_stop: bool) -> AsyncIterator[ListenerHost]:
    """A ListenerHost with one hosted listener holding the scale set's session; stopped
    (with or without release) when the block ends."""
    api_client = await new_api_client(kubeconfig=world.kubeconfig, pool_size=4)
    kube = KubeClient(api_client, owns_api_client=True)
    cfg = world.listener_config()
    api = build_actions_client(cfg)
    metrics = ListenerMetrics(
        name=ERS_NAME, namespace=world.namespace, organization=DEFAULT_ORG, config=None
    )

    async def resolve(_fresh: bool) -> Any:
        return cfg, api, metrics

    host = ListenerHost(kube, identity="gharc-controller-0")
    host.release_on_stop = release_on_stop
    released: list[tuple[tuple[str, str], str]] = []

    async def on_released(runner_set: tuple[str, str], session_id: str) -> None:
        released.append((runner_set, session_id))

    host.on_released = on_released
    host.released = released  # type: ignore[attr-defined]
    host.ensure(KEY, (world.namespace, ERS_NAME), "fp", resolve)
    try:
        await eventually(lambda: _recorded(world), timeout=15, message="gharc's session")
        yield host
    finally:
        await host.stop()
        await api.aclose()
        await kube.close()


class _ArcStylePatcher:
    """ARC's listener: patches the set, records no session and reads none."""

    def __init__(self, inner: KubePatcher) -> None:
        self.inner = inner

    async def patch_replicas(self, replicas: int, patch_id: int) -> None:
        await self.inner.patch_replicas(replicas, patch_id)

    async def patch_runner_job(self, runner_name: str, status: dict[str, Any]) -> None:
        await self.inner.patch_runner_job(runner_name, status)

    async def aclose(self) -> None:
        await self.inner.aclose()


@contextlib.asynccontextmanager
async def _arc_listener(world: World) -> AsyncIterator[Listener]:
    """A successor that cannot resume: it creates a session and retries 409 (0.2-0.5 s
    apart here, ARC's own pace is slower) for as long as the old session lives."""
    cfg = world.listener_config(session_conflict_attempts=100_000)
    patcher = _ArcStylePatcher(
        KubePatcher(
            await new_api_client(kubeconfig=world.kubeconfig, pool_size=4),
            world.namespace,
            ERS_NAME,
        )
    )
    api = build_actions_client(cfg)
    listener = Listener(cfg, api, patcher, owner="arc-listener")
    task = asyncio.create_task(listener.run())
    try:
        yield listener
    finally:
        listener.request_stop()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, timeout=15)
        await api.aclose()
        await patcher.aclose()


def _conflicts(world: World) -> int:
    return world.gh.calls("*/sessions", method="POST", status=409)


async def _replicas(world: World) -> int:
    return (await world.spec())[0]


async def _picked_up(world: World, wanted: int) -> bool:
    return await _replicas(world) >= wanted


async def test_stop_for_good_hands_the_scale_set_to_an_arc_listener_at_once(
    world: World,
) -> None:
    async with _gharc(world, release_on_stop=True) as host:
        gharc_session = await _recorded(world)
    stopped = time.monotonic()
    # (a) the successor that cannot resume creates its session and scales for a job.
    async with _arc_listener(world) as arc:
        world.enqueue(1)
        await eventually(
            lambda: _picked_up(world, 1), timeout=PICKUP_LIMIT, message="ARC listener's pickup"
        )
        pickup = time.monotonic() - stopped
        assert arc.sessions.session is not None
        assert arc.sessions.session.session_id != gharc_session
    print(f"ARC-style successor scaled for a job {pickup:.2f} s after gharc stopped for good")
    assert _conflicts(world) == 0, world.gh.call_table()
    # (c) gharc's session is gone at GitHub and its annotation from the set.
    assert gharc_session not in world.gh.state.sessions
    assert await _recorded(world) is None
    assert host.released == [((world.namespace, ERS_NAME), gharc_session)]  # type: ignore[attr-defined]


async def test_normal_stop_keeps_the_session_for_a_gharc_successor(world: World) -> None:
    async with _gharc(world, release_on_stop=False) as host:
        gharc_session = await _recorded(world)
    # (b) the session stays open and recorded ...
    assert world.active_session() is not None
    assert await _recorded(world) == gharc_session
    assert host.released == []  # type: ignore[attr-defined]
    creates = world.gh.calls("*/sessions", method="POST")
    # ... and the next gharc resumes it: no session created, no 409.
    async with _gharc(world, release_on_stop=False):
        world.enqueue(1)
        await eventually(lambda: _picked_up(world, 1), timeout=15, message="gharc's pickup")
        assert await _recorded(world) == gharc_session
    assert world.gh.calls("*/sessions", method="POST") == creates
    assert _conflicts(world) == 0


async def test_normal_stop_leaves_an_arc_listener_blocked_by_409(world: World) -> None:
    """Why the release exists: after a normal stop an ARC listener gets 409 until the
    service drops gharc's session (120 s in the fake), and no job is scaled for."""
    async with _gharc(world, release_on_stop=False):
        pass
    async with _arc_listener(world) as arc:
        world.enqueue(1)
        await eventually(lambda: _true(_conflicts(world) >= 5), timeout=15, message="409s")
        await asyncio.sleep(2.0)
        assert arc.sessions.session is None
        assert await _replicas(world) == 0
    assert await _recorded(world) is not None  # ARC would patch the set's metadata for it


async def _true(value: bool) -> bool:
    return value
