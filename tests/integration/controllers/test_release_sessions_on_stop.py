"""``--release-sessions-on-stop``: the whole controller, stopped for good or not.

The controller runs its listener in process against the fake GitHub; it is stopped as
SIGTERM stops it (``manager.stop()``). With the flag the scale set is left as ARC would have
it: no session at GitHub, no ``message-session-id`` annotation on the EphemeralRunnerSet, no
gharc finalizer on the GitHub Secret and no ``protected-github-secret`` annotation on the
AutoscalingRunnerSet, with an event on each object. Without it the session stays open and
recorded, for the next gharc to resume.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from _arsworld import SECRET_NAME, World, running_world

from gharc.api.resources import AUTOSCALING_RUNNER_SETS, EPHEMERAL_RUNNER_SETS
from gharc.api.scaleset import constants as c
from gharc.kube.client import KubeClient
from gharc.kube.resources import EVENTS, SECRETS
from testworld.wait import eventually

JSON = dict[str, Any]


def _annotation(obj: JSON | None, key: str) -> str | None:
    return ((obj or {}).get("metadata", {}).get("annotations") or {}).get(key)


async def _started(w: World) -> tuple[JSON, str]:
    """An ARS whose in-process listener holds a session recorded on its set."""
    ars = await w.create_ars()

    async def recorded() -> str | None:
        return _annotation(await w.ers(), c.ANNOTATION_MESSAGE_SESSION_ID)

    session_id = await eventually(recorded, timeout=30, message="session recorded")
    await w.wait_ars(
        lambda a: _annotation(a, c.ANNOTATION_PROTECTED_GITHUB_SECRET) == SECRET_NAME,
        message="GitHub Secret protected",
    )
    return ars, str(session_id)


#: What ARC puts on an EphemeralRunnerSet (spec §5.2).
ARC_ERS_ANNOTATIONS = {
    c.ANNOTATION_RUNNER_GROUP_NAME,
    c.ANNOTATION_RUNNER_SCALE_SET_NAME,
    c.ANNOTATION_INTEGRITY_HASH,
}


def _keys(obj: JSON) -> set[str]:
    return set((obj.get("metadata", {}).get("annotations") or {}).keys())


async def _finalizers(kube: KubeClient, namespace: str) -> list[str]:
    secret = await kube.get(SECRETS, SECRET_NAME, namespace=namespace)
    return list(secret["metadata"].get("finalizers") or [])


@pytest.mark.parametrize("release", [True, False], ids=["for-good", "rolling"])
async def test_stop_releases_sessions_and_marks_only_when_told(
    kubeconfig: str, namespace: str, release: bool
) -> None:
    async with running_world(
        kubeconfig, namespace, listener_mode="InProcess", release_sessions_on_stop=release
    ) as w:
        ars, session_id = await _started(w)
        assert c.FINALIZER_GITHUB_SECRET_PROTECTION in await _finalizers(w.kube, namespace)
        assert w.gh.state.sessions.get(session_id) is not None
        stopped = time.monotonic()
        w.manager.stop()

        async def stopped_manager() -> bool:
            return not w.manager.is_leader and not await w.manager.wait_started(0.01)

        await eventually(stopped_manager, timeout=30, message="manager stopped")
        took = time.monotonic() - stopped
        session_alive = w.gh.state.sessions.get(session_id) is not None
        print(f"release={release}: stopped in {took:.2f} s, session alive {session_alive}")
    kube = await KubeClient.from_config(kubeconfig=kubeconfig)
    try:
        ers = await kube.get(EPHEMERAL_RUNNER_SETS, "arc", namespace=namespace)
        ars = await kube.get(AUTOSCALING_RUNNER_SETS, "arc", namespace=namespace)
        finalizers = await _finalizers(kube, namespace)
        reasons = {e.get("reason") for e in await kube.list(EVENTS, namespace=namespace)}
        # The finalizer would otherwise hold the test namespace's Secret: let it go.
        if finalizers:
            secret = await kube.get(SECRETS, SECRET_NAME, namespace=namespace)
            await kube.merge_patch(SECRETS, secret, {"metadata": {"finalizers": None}})
    finally:
        await kube.close()
    print(f"release={release}: EphemeralRunnerSet annotations {sorted(_keys(ers))}")
    if release:
        # Only keys ARC writes itself are left (its own desired set is compared exactly).
        assert _keys(ers) <= ARC_ERS_ANNOTATIONS, _keys(ers)
        assert not session_alive
        assert _annotation(ers, c.ANNOTATION_MESSAGE_SESSION_ID) is None
        assert _annotation(ars, c.ANNOTATION_PROTECTED_GITHUB_SECRET) is None
        assert c.FINALIZER_GITHUB_SECRET_PROTECTION not in finalizers
        assert {"MessageSessionReleased", "ReleasedByGharc"} <= reasons
    else:
        assert session_alive
        assert _annotation(ers, c.ANNOTATION_MESSAGE_SESSION_ID) == session_id
        assert _annotation(ars, c.ANNOTATION_PROTECTED_GITHUB_SECRET) == SECRET_NAME
        assert c.FINALIZER_GITHUB_SECRET_PROTECTION in finalizers
        assert not {"MessageSessionReleased", "ReleasedByGharc"} & reasons


async def test_gharc_release_does_it_for_a_controller_stopped_without_the_flag(
    kubeconfig: str, namespace: str
) -> None:
    """``gharc release``: the sessions a normal stop left are deleted from outside."""
    from gharc.controllers.scaleset.release import run_release

    async with running_world(kubeconfig, namespace, listener_mode="InProcess") as w:
        _, session_id = await _started(w)
        w.manager.stop()

        async def stopped_manager() -> bool:
            return not await w.manager.wait_started(0.01)

        await eventually(stopped_manager, timeout=30, message="manager stopped")
        assert w.gh.state.sessions.get(session_id) is not None  # left for a successor
        assert await run_release(kubeconfig, namespace) == 0
        assert w.gh.state.sessions.get(session_id) is None
        ers = await w.ers()
        ars = await w.ars()
        assert _annotation(ers, c.ANNOTATION_MESSAGE_SESSION_ID) is None
        assert _annotation(ars, c.ANNOTATION_PROTECTED_GITHUB_SECRET) is None
        assert c.FINALIZER_GITHUB_SECRET_PROTECTION not in await _finalizers(w.kube, namespace)
        # Again: nothing left to do, still success.
        assert await run_release(kubeconfig, namespace) == 0
