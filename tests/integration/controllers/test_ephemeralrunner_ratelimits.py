"""EphemeralRunner: a rate limit is waited for by requeueing, never inside a reconcile
(issue 19 §4): one runner's 429 must not hold a worker until it lifts. The limit is the
credential's (issue 28 §7): the other runners' JIT config calls wait for it too, instead of
each sending into it and drawing a 429 of its own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from _erworld import World, make_world

from testworld.wait import eventually

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


async def test_rate_limited_jit_config_holds_other_runners_without_a_worker(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gharc.controllers.scaleset.error_reporting")
    world.gh.add_fault("secondary_rate_limit", route=JIT, status=429, retry_after=30, count=1)
    await world.create_ers(replicas=2, patch_id=1)

    async def both_requeued() -> bool:
        names = [r["metadata"]["name"] for r in await world.runners()]
        waiting = [
            name
            for name in names
            if any(f"/{name}: " in m and "retry in" in m for m in caplog.messages)
        ]
        return len(names) == 2 and len(waiting) == 2

    # One worker reconciled both runners: neither reconcile slept out the 30 s.
    await eventually(both_requeued, timeout=15, message="both runners requeued for the limit")
    assert world.gh.calls(JIT, method="POST") == 1, "the other runner sent into the limit"
    assert not any((r.get("status") or {}).get("runnerId") for r in await world.runners())
