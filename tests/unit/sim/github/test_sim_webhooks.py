"""The fake's webhook deliveries as GitHub makes them: no automatic retry, a redelivery
under the same ``X-GitHub-Delivery``, and deliveries in flight side by side."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from testworld.controlplane import free_port
from testworld.sim.github import DEFAULT_REPO
from testworld.sim.github.state import FakeGitHubState
from testworld.sim.github.webhooks import GITHUB_RETRIES, WebhookDeliverer


class Receiver:
    """A hook endpoint that records each request's delivery ID and answers after
    ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.guids: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.port = free_port()
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.guids.append(request.headers["X-GitHub-Delivery"])
        await asyncio.sleep(self.delay)
        self.in_flight -= 1
        return web.Response(text="ok")

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/", self.handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()


@pytest.mark.pins("webhook-no-retry")
async def test_a_failed_delivery_is_not_retried_and_a_redelivery_keeps_its_id() -> None:
    state = FakeGitHubState()
    hooks = WebhookDeliverer(state, retry_delays=GITHUB_RETRIES)
    hook = hooks.add_hook(f"http://127.0.0.1:{free_port()}/", "s")  # nothing listens
    await hooks.start()
    try:
        state.enqueue_job(DEFAULT_REPO, ["linux"])
        await hooks.drain()
        (lost,) = hooks.of("queued")
        assert lost.status is None and lost.attempts == 1
        async with Receiver() as receiver:
            hook.url = f"http://127.0.0.1:{receiver.port}/"
            again = hooks.redeliver(lost)
            await hooks.drain()
        assert again.redelivery and again.ok and again.guid == lost.guid
        assert receiver.guids == [lost.guid]
    finally:
        await hooks.stop()


async def test_deliveries_go_side_by_side_up_to_the_concurrency() -> None:
    state = FakeGitHubState()
    async with Receiver(delay=0.3) as receiver:
        hooks = WebhookDeliverer(state, concurrency=4)
        hooks.add_hook(f"http://127.0.0.1:{receiver.port}/", "s")
        await hooks.start()
        try:
            for _ in range(8):
                state.enqueue_job(DEFAULT_REPO, ["linux"])
            await hooks.drain()
        finally:
            await hooks.stop()
    assert all(d.ok for d in hooks.deliveries) and len(hooks.deliveries) == 8
    assert receiver.most_in_flight == 4
