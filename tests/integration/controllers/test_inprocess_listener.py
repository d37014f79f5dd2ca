"""In-process listeners (``--listener-mode InProcess``) on the real API server.

The listener runs as a task of the controller: no pod, its state on the AutoscalingListener.
A credential outage (the PAT revoked, derived tokens expired) must cost the outage and no
more: the listener keeps its session, backs off along B1's ladder with a Warning event, reads
the Secret again and resumes the same session once a working token is there, without a
restart of anything.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _arsworld import SECRET_NAME, World, running_world

from gharc.api.resources import EPHEMERAL_RUNNER_SETS
from gharc.controllers.scaleset.autoscalinglistener import AutoscalingListenerReconciler
from gharc.kube.resources import PODS, SECRETS
from testworld.sim.github import DEFAULT_REPO
from testworld.wait import eventually


async def _status(w: World, ars: dict[str, Any]) -> dict[str, Any]:
    listener = await w.listener(ars)
    return dict((listener or {}).get("status") or {})


async def test_credential_outage_keeps_the_session_and_recovers_on_a_rotated_token(
    kubeconfig: str, namespace: str
) -> None:
    async with running_world(
        kubeconfig, namespace, listener_mode="InProcess", listener_failure_backoff=(1.0, 2.0)
    ) as w:
        ars = await w.create_ars(maxRunners=3)

        async def running() -> dict[str, Any] | None:
            status = await _status(w, ars)
            return status if status.get("phase") == "Running" and status.get("sessionId") else None

        first = await eventually(running, timeout=30, message="in-process listener running")
        session_id = first["sessionId"]
        assert await w.get_or_none(PODS, w.listener_name(ars)) is None  # no pod in this mode

        # The outage: the PAT is revoked and every token derived from it expires.
        w.gh.state.revoke_token(w.gh.token)
        for kind in ("registration", "admin", "queue"):
            w.gh.state.expire(kind)

        async def backing_off() -> dict[str, Any] | None:
            status = await _status(w, ars)
            ok = status.get("phase") == "BackOff" and int(status.get("failures") or 0) >= 2
            return status if ok else None

        failed = await eventually(backing_off, timeout=60, message="listener backing off")
        assert "credentials" in failed["message"]
        await w.wait_event("ListenerBackOff")
        assert w.gh.state.sessions.get(session_id) is not None  # kept, not deleted

        # The scale set says so too: its owners may not read the controller's namespace.
        async def ars_reports_it() -> dict[str, Any] | None:
            status = (await w.ars(ars["metadata"]["name"])).get("status") or {}
            found = [x for x in status.get("conditions") or [] if x["type"] == "ListenerRunning"]
            ok = found and found[0]["status"] == "False" and found[0]["reason"] == "BackOff"
            return status if ok and "credentials" in str(status.get("message")) else None

        await eventually(ars_reports_it, timeout=30, message="the ARS reporting its listener")
        await w.wait_event("ListenerFailing")

        # The fix: a new token rotated into the same Secret (nothing restarted).
        token = w.gh.state.create_pat()
        secret = await w.kube.get(SECRETS, SECRET_NAME, namespace=namespace)
        await w.kube.merge_patch(SECRETS, secret, {"stringData": {"github_token": token}})

        async def recovered() -> dict[str, Any] | None:
            status = await _status(w, ars)
            return status if status.get("phase") == "Running" else None

        loop = asyncio.get_running_loop()
        rotated_at = loop.time()
        back = await eventually(recovered, timeout=60, message="listener recovered")
        # Read again after the failure, not when the controller's 30 s Secret cache expires.
        assert loop.time() - rotated_at < 25
        assert back["sessionId"] == session_id  # the same session, resumed

        async def ars_clear() -> bool:
            status = (await w.ars(ars["metadata"]["name"])).get("status") or {}
            found = [x for x in status.get("conditions") or [] if x["type"] == "ListenerRunning"]
            return bool(found and found[0]["status"] == "True" and not status.get("message"))

        await eventually(ars_clear, timeout=30, message="the ARS condition cleared")
        w.gh.enqueue_job(DEFAULT_REPO, [ars["metadata"]["name"]])

        async def scaled() -> bool:
            ers = await w.ers(ars["metadata"]["name"])
            return bool(ers and (ers.get("spec") or {}).get("replicas") == 1)

        await eventually(scaled, timeout=30, message="the job's runner requested")
        assert await w.kube.list(EPHEMERAL_RUNNER_SETS, namespace=namespace)


async def test_a_token_rotated_in_the_secret_is_picked_up_before_the_old_one_dies(
    kubeconfig: str, namespace: str
) -> None:
    """Secret rotation (G19) within a bounded time, with nothing deleted or restarted."""
    async with running_world(
        kubeconfig,
        namespace,
        listener_mode="InProcess",
        listener_resync_seconds=1.0,
        listener_failure_backoff=(1.0, 2.0),
    ) as w:
        ars = await w.create_ars(maxRunners=3)

        async def running() -> dict[str, Any] | None:
            status = await _status(w, ars)
            return status if status.get("phase") == "Running" and status.get("sessionId") else None

        first = await eventually(running, timeout=30, message="in-process listener running")
        token = w.gh.state.create_pat()
        secret = await w.kube.get(SECRETS, SECRET_NAME, namespace=namespace)
        await w.kube.merge_patch(SECRETS, secret, {"stringData": {"github_token": token}})

        async def new_token_used() -> bool:
            return w.gh.state.pats[token].bucket.used > 0

        # The Secret cache (30 s) plus one resync period.
        await eventually(new_token_used, timeout=60, message="the rotated token in use")
        w.gh.state.revoke_token(w.gh.token)
        for kind in ("registration", "admin", "queue"):
            w.gh.state.expire(kind)
        w.gh.enqueue_job(DEFAULT_REPO, [ars["metadata"]["name"]])

        async def scaled() -> bool:
            ers = await w.ers(ars["metadata"]["name"])
            return bool(ers and (ers.get("spec") or {}).get("replicas") == 1)

        await eventually(scaled, timeout=30, message="the job's runner requested")
        status = await _status(w, ars)
        assert status.get("phase") == "Running" and not status.get("failures")
        assert status["sessionId"] == first["sessionId"]


async def test_the_listener_reporting_its_messages_does_not_read_its_settings_again(
    kubeconfig: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hosted listener's state changes (a message's time, a session) wake its reconcile,
    which mirrors them into status. The settings (and the GitHub Secret behind them) were
    read this resync period and the spec has not changed, so they are not read again: on a
    thousand quiet sets, each job would cost one Secret read more."""
    reads: list[str] = []
    original = AutoscalingListenerReconciler._listener_config

    async def counted(self: AutoscalingListenerReconciler, listener: dict[str, Any]) -> Any:
        reads.append(listener["metadata"]["name"])
        return await original(self, listener)

    monkeypatch.setattr(AutoscalingListenerReconciler, "_listener_config", counted)
    async with running_world(kubeconfig, namespace, listener_mode="InProcess") as w:
        ars = await w.create_ars(maxRunners=3)

        async def running() -> dict[str, Any] | None:
            status = await _status(w, ars)
            return status if status.get("phase") == "Running" and status.get("sessionId") else None

        await eventually(running, timeout=30, message="in-process listener running")
        settled = len(reads)
        assert settled >= 1
        w.gh.enqueue_job(DEFAULT_REPO, [ars["metadata"]["name"]])

        async def reported() -> bool:
            return bool((await _status(w, ars)).get("lastMessageTime"))

        await eventually(reported, timeout=40, message="the last message's time in status")
        assert len(reads) == settled, "the settings were read again for a status change"
