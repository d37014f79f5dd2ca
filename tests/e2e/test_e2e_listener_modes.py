"""Switching listener modes on a live scale set: Pod -> InProcess loses no job.

An ARC user starts with listener pods (``--listener-mode=Pod``, ARC's way) and upgrades the
controller to the in-process default. The new controller must remove the listener pod and
its copy of the credentials from its namespace, take over the pod listener's message session
(recorded on the EphemeralRunnerSet) instead of waiting out a 409, show the session on the
AutoscalingListener, and run every job, with one runner per job.
"""

from __future__ import annotations

import pytest
from _e2e import WorldFactory, all_completed, enqueue_jobs, listener_pods, report, wait_until

from gharc.api.scaleset.constants import ANNOTATION_MESSAGE_SESSION_ID

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_pod_listener_is_replaced_by_an_in_process_one(worlds: WorldFactory) -> None:
    ns = "e2e-modes"
    world = await worlds.create(ns, poll_timeout=5.0, controller_args=["--listener-mode=Pod"])
    await world.apply_scale_set(ns, "modes", max_runners=4)
    await world.wait_for_listener("modes")
    assert len(await listener_pods(world, ns)) == 1
    first = enqueue_jobs(world, ["modes"], 4, durations=(0.2, 0.5))
    await wait_until(lambda: all_completed(first), 90, "jobs under pod mode", world=world)
    pod_session = next(iter(world.github.state.sessions.values())).id
    ers = (await world.custom_objects(ns, "ephemeralrunnersets"))[0]
    assert ers["metadata"]["annotations"][ANNOTATION_MESSAGE_SESSION_ID] == pod_session

    # The upgrade: the same controller, now with listeners in process.
    await world.stop_controller()
    world.controller_args = [a for a in world.controller_args if "listener-mode" not in a]
    await world.start_controller()

    async def pod_gone() -> bool:
        secrets = [s["metadata"]["name"] for s in await world.secrets(ns)]
        return not await listener_pods(world, ns) and not any(
            name.endswith("-listener-config") for name in secrets
        )

    await wait_until(pod_gone, 60, "the listener pod and its config secret to go", world=world)

    async def listener_running() -> bool:
        listeners = await world.custom_objects(ns, "autoscalinglisteners")
        status = listeners[0].get("status") or {} if listeners else {}
        return status.get("phase") == "Running" and bool(status.get("sessionId"))

    await wait_until(listener_running, 60, "the in-process listener's status", world=world)
    second = enqueue_jobs(world, ["modes"], 6, durations=(0.2, 0.5))
    await wait_until(lambda: all_completed(second), 90, "jobs under in-process mode", world=world)
    rep = report(world, first + second)
    assert world.runners_created() == 10, rep.text()
    # Never a second session while the first was alive: no 409 at the fake.
    assert world.github.calls("*/sessions", method="POST", status=409) == 0, rep.text()
