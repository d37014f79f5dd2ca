"""Behaviours B1: a crashing listener is restarted with backoff, not in a storm.

No kubelet runs here: the tests report the listener container's state by patching the
pod's status, exactly as a kubelet would after the process exited.
"""

from __future__ import annotations

from typing import Any

from _arsworld import World, running_world, utc

from gharc.api.scaleset import constants as c
from gharc.kube import objects
from gharc.kube.resources import PODS
from testworld.wait import consistently, eventually


async def _listener_status(w: World, ars: dict[str, Any]) -> dict[str, Any]:
    listener = await w.listener(ars)
    assert listener is not None
    return dict(listener.get("status") or {})


async def _crash(w: World, pod: dict[str, Any], code: int = 1) -> None:
    await w.set_listener_state(
        pod,
        {
            "terminated": {
                "exitCode": code,
                "reason": "Error",
                "startedAt": utc(-2),
                "finishedAt": utc(),
            }
        },
        phase="Failed",
    )


async def _same_pod_for(w: World, ars: dict[str, Any], uid: str, seconds: float) -> None:
    """Assert the pod with ``uid`` stays for ``seconds`` (it must not be deleted early)."""
    name = w.listener_name(ars)

    async def same_pod() -> bool:
        pod = await w.get_or_none(PODS, name)
        return pod is not None and pod["metadata"]["uid"] == uid and not objects.is_deleting(pod)

    await consistently(
        same_pod, seconds=seconds, interval=0.2, message="listener pod replaced or deleted early"
    )


async def test_failed_listener_waits_out_its_backoff_and_counts_reset_on_running(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        ars = await w.create_ars("arc")
        first = await w.wait_listener_pod(ars)

        # Failure 1: the Error pod stays for the first step of the ladder (5 s).
        await _crash(w, first)
        await _same_pod_for(w, ars, first["metadata"]["uid"], 3.0)
        status = await _listener_status(w, ars)
        assert status["failures"] == 1
        assert status["lastFailedPodUID"] == first["metadata"]["uid"]
        assert status["lastFailureTime"]
        assert "restarting at" in status["message"]
        event = await w.wait_event("ListenerBackOff")
        assert event["type"] == "Warning" and "restarting at" in event["message"]
        second = await w.wait_listener_pod(ars, other_than=first["metadata"]["uid"], timeout=10)

        # Failure 2: the ladder climbs to 10 s, so the pod is still there after 6 s.
        await _crash(w, second)
        await _same_pod_for(w, ars, second["metadata"]["uid"], 6.0)
        status = await _listener_status(w, ars)
        assert status["failures"] == 2
        assert status["lastFailedPodUID"] == second["metadata"]["uid"]
        third = await w.wait_listener_pod(ars, other_than=second["metadata"]["uid"], timeout=10)

        # A listener that has been running a while resets the count.
        await w.run_listener(third, started=-60)

        async def reset() -> dict[str, Any] | None:
            s = await _listener_status(w, ars)
            return s if s.get("failures") == 0 and s.get("phase") == c.PHASE_RUNNING else None

        await eventually(reset, timeout=10, message="failure count reset")
        await w.wait_ars(lambda a: (a.get("status") or {}).get("phase") == c.PHASE_RUNNING)


async def test_listener_that_exits_zero_is_recreated_at_once(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(kubeconfig, namespace) as w:
        ars = await w.create_ars("arc")
        first = await w.wait_listener_pod(ars)
        await _crash(w, first, code=0)
        await w.wait_listener_pod(ars, other_than=first["metadata"]["uid"], timeout=4)
        assert not (await _listener_status(w, ars)).get("failures")


async def test_evicted_listener_pod_is_recreated(kubeconfig: str, namespace: str) -> None:
    async with running_world(kubeconfig, namespace) as w:
        ars = await w.create_ars("arc")
        first = await w.wait_listener_pod(ars)
        await w.kube.patch_status(
            PODS,
            first,
            {"status": {"phase": "Failed", "reason": "Evicted", "message": "node pressure"}},
        )
        await w.wait_listener_pod(ars, other_than=first["metadata"]["uid"], timeout=4)
