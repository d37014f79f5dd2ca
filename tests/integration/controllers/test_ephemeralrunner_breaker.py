"""EphemeralRunner: while GitHub answers 5xx, all pending runners share one backoff (the
(host, credential) circuit breaker) instead of each retrying on its own (issue 19 §4: ten
pending runners made 164 JIT config calls in 30 s of 503s), and they all register once
GitHub answers again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import pytest
from _erworld import World, make_world

pytestmark = pytest.mark.cluster

log = logging.getLogger(__name__)

JIT = "*/generatejitconfig"
RUNNERS = 10
OUTAGE = 10.0


@pytest.fixture
async def world(kubeconfig: str, namespace: str) -> AsyncIterator[World]:
    w, close = await make_world(kubeconfig, namespace)
    try:
        yield w
    finally:
        await close()


async def test_503_window_makes_a_bounded_number_of_jit_calls(world: World) -> None:
    world.gh.add_fault("status", route=JIT, method="POST", status=503, seconds=OUTAGE)
    start = time.monotonic()
    await world.create_ers(replicas=RUNNERS, patch_id=1)
    # The breaker's windows (2, 4, 8 s) end past the outage; the runners then register.
    await world.wait_runners(RUNNERS, timeout=OUTAGE + 35)
    elapsed = time.monotonic() - start
    failed = world.gh.calls(JIT, method="POST", status=503)
    total = world.gh.calls(JIT, method="POST")
    log.warning(
        "%d runners, %.0fs of 503: %d failed JIT calls, %d in all, registered after %.1fs",
        RUNNERS,
        OUTAGE,
        failed,
        total,
        elapsed,
    )
    # Without the breaker each runner retries 5 times per reconcile: about 90 calls in
    # the window on this fake. With it: the first wave, then two probes per window.
    assert failed <= 25, f"{failed} JIT calls answered 503"
    assert total - failed == RUNNERS, "each runner registered exactly once"
