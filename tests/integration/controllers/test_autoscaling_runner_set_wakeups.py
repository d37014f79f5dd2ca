"""What wakes the AutoscalingRunnerSet reconciler, against the real API server.

The listener writes the EphemeralRunnerSet's ``spec.replicas``/``spec.patchID`` for every
job, and an in-process listener its AutoscalingListener's ``status.lastMessageTime``; the
set reads neither, so neither may cost a reconcile of it. Everything it does read (the
runner set's status, the listener's phase and message) still wakes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from _arsworld import World, running_world, utc
from _reconciles import reconcile_count, settled_count

from gharc.api.resources import AUTOSCALING_LISTENERS, EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from testworld.wait import eventually

pytestmark = [pytest.mark.cluster]

CONTROLLER = "autoscalingrunnerset"
QUIET = 2.0
"""Seconds without a reconcile of the set that count as settled (and as "not woken")."""


async def wakes(w: World, write: Callable[[], Awaitable[object]]) -> bool:
    """Whether ``write`` led to a reconcile of the set within :data:`QUIET` seconds."""
    before = await settled_count(CONTROLLER, QUIET)
    await write()
    await asyncio.sleep(QUIET)
    return reconcile_count(CONTROLLER) > before


async def test_scale_writes_and_listener_heartbeats_do_not_wake_the_set(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        await w.create_ars("arc")
        ars = await w.wait_ars(
            lambda a: c.ANNOTATION_RUNNER_SCALE_SET_ID in (a["metadata"].get("annotations") or {}),
            message="scale set id annotation",
        )
        await w.wait_listener_pod(ars)
        ers = await eventually(w.ers, message="EphemeralRunnerSet")
        listener = await eventually(lambda: w.listener(ars), message="AutoscalingListener")
        ers_name = ers["metadata"]["name"]

        async def listener_patch() -> object:
            body = {"spec": {"replicas": 0, "patchID": 7}}
            return await w.kube.merge_patch(
                EPHEMERAL_RUNNER_SETS, ers_name, body, namespace=namespace
            )

        async def heartbeat() -> object:
            body = {"status": {"lastMessageTime": utc()}}
            return await w.kube.patch_status(AUTOSCALING_LISTENERS, listener, body)

        async def runner_counts() -> object:
            body = {"status": {"pendingEphemeralRunners": 5}}
            return await w.kube.patch_status(EPHEMERAL_RUNNER_SETS, ers, body)

        async def listener_message() -> object:
            body = {"status": {"message": "connecting"}}
            return await w.kube.patch_status(AUTOSCALING_LISTENERS, listener, body)

        assert not await wakes(w, listener_patch), "a listener's count woke the set"
        assert not await wakes(w, heartbeat), "a listener's last-message time woke the set"
        # The controls: the same watches still carry what the set reads.
        assert await wakes(w, runner_counts)
        assert await wakes(w, listener_message)
