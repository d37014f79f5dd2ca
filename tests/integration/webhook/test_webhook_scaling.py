"""Signed workflow_job deliveries from the fake GitHub to a running ``gharc webhook-server``
scale a RunnerDeployment through capacity reservations and the HRA controller."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gharc.kube.client import KubeClient
from gharc.webhook.main import WebhookArgs
from testworld import webhook
from testworld.sim.github import DEFAULT_REPO, FakeGitHubServer
from testworld.sim.github.webhooks import WebhookDeliverer
from testworld.wait import eventually

sys.path.insert(0, str(Path(__file__).parents[1] / "legacy"))
from _hraworld import HRAWorld

pytestmark = pytest.mark.cluster
SECRET = "webhook-s3cret"


@pytest.fixture
async def world(
    api_client: Any, namespace: str, kubeconfig: str
) -> AsyncIterator[tuple[HRAWorld, WebhookDeliverer, Any]]:
    async with FakeGitHubServer(port=0, rest_max_age=0) as gh:
        w = HRAWorld(KubeClient(api_client), gh, namespace)
        await w.start()
        args = WebhookArgs(
            webhook_addr="127.0.0.1:0",
            metrics_addr="0",
            watch_namespace=namespace,
            secret=SECRET,
            batch_window=0.3,
            kubeconfig=kubeconfig,
        )
        holder: dict[str, Any] = {}
        task = asyncio.create_task(webhook.serve(args, holder))
        await eventually(lambda: _started(holder), timeout=30, message="webhook server up")
        server = holder["server"]
        hooks = WebhookDeliverer(gh.state)
        hooks.add_hook(f"http://127.0.0.1:{server.port}/", SECRET)
        await hooks.start()
        try:
            yield w, hooks, server
        finally:
            await hooks.stop()
            holder["manager"].stop()
            await asyncio.wait_for(task, 15)
            await w.stop()


async def _started(holder: dict[str, Any]) -> bool:
    server = holder.get("server")
    return bool(server is not None and server.started.is_set())


async def _setup(w: HRAWorld) -> None:
    await w.create_rd(replicas=0, labels=["linux"])
    await w.create_hra(
        minReplicas=0,
        maxReplicas=5,
        scaleDownDelaySecondsAfterScaleOut=0,
        scaleUpTriggers=[{"githubEvent": {"workflowJob": {}}, "duration": "5m"}],
    )


async def _reservations(w: HRAWorld) -> int:
    return len((await w.hra())["spec"].get("capacityReservations") or [])


async def test_queued_deliveries_reserve_runners_and_completions_release_them(
    world: tuple[HRAWorld, WebhookDeliverer, Any],
) -> None:
    w, hooks, _ = world
    await _setup(w)
    jobs = [w.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"]) for _ in range(3)]
    await hooks.drain()
    assert [d.status for d in hooks.of("queued")] == [200, 200, 200]
    assert all(d.response == "scaled hra by 1" for d in hooks.of("queued"))
    await w.wait_replicas(3)
    assert await _reservations(w) == 3

    w.gh.cancel_job(jobs[0].request_id)  # completed, conclusion cancelled -> -1
    w.gh.cancel_job(jobs[1].request_id)
    await hooks.drain()
    assert [d.response for d in hooks.of("completed")] == ["scaled hra by -1"] * 2
    await w.wait_replicas(1)
    assert await _reservations(w) == 1


async def test_a_badly_signed_delivery_is_rejected_and_changes_nothing(
    world: tuple[HRAWorld, WebhookDeliverer, Any],
) -> None:
    w, hooks, server = world
    await _setup(w)
    hooks.hooks[0].signature = "sha256=" + "0" * 64  # a forger without the secret
    w.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"])
    await hooks.drain()
    (d,) = hooks.of("queued")
    assert d.status == 403 and d.attempts == 1  # a 4xx is not retried
    await asyncio.sleep(1.0)  # longer than the batch window
    assert await _reservations(w) == 0
    assert server.scaler.patches == 0
    assert (await w.rd())["spec"]["replicas"] == 0


async def test_a_delivery_to_a_server_that_is_down_is_retried(
    world: tuple[HRAWorld, WebhookDeliverer, Any],
) -> None:
    w, hooks, _ = world
    await _setup(w)
    hooks.hooks[0].url = "http://127.0.0.1:9/"  # nothing listens on the discard port
    w.gh.enqueue_job(DEFAULT_REPO, ["self-hosted", "linux"])
    await hooks.drain()
    (d,) = hooks.of("queued")
    assert d.status is None and d.attempts == 1 + len(hooks.retry_delays)
