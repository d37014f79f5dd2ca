"""EphemeralRunner: a rate limit is waited for by requeueing, never inside a reconcile
(issue 19 §4): one runner's 429 must not hold a worker, nor any other runner, until it lifts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from _erworld import World, make_world

from gharc.testing.wait import eventually

pytestmark = pytest.mark.cluster

JSON = dict[str, Any]
JIT = "*/generatejitconfig"


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    # One worker: a reconcile that slept out the limit would hold every other runner.
    w, close = await make_world(kubeconfig, namespace, runner_max_concurrent_reconciles=1)
    try:
        yield w
    finally:
        await close()


async def test_rate_limited_jit_config_does_not_block_another_runner(world: World) -> None:
    world.gh.add_fault("secondary_rate_limit", route=JIT, status=429, retry_after=30, count=1)
    await world.create_ers(replicas=2, patch_id=1)

    async def one_registered() -> list[JSON] | None:
        runners = await world.runners()
        done = [r for r in runners if (r.get("status") or {}).get("runnerId")]
        return done if len(runners) == 2 and done else None

    [registered] = await eventually(
        one_registered, timeout=15, message="the other runner registered"
    )
    # The limited runner waits for the limit to lift (30 s), without retrying before.
    name = registered["metadata"]["name"]
    waiting = [r for r in await world.runners() if r["metadata"]["name"] != name]
    assert len(waiting) == 1 and not (waiting[0].get("status") or {}).get("runnerId")
    assert world.gh.calls(JIT, method="POST") == 2, "the limited call was not retried early"
